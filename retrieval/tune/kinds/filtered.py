"""Workload kind ``filtered`` (``filters:``): per entry x build x strategy x selectivity bucket,
measured through the Optuna study (strategy target only)."""

from __future__ import annotations

from typing import Any

from retrieval.errors import param_error
from retrieval.runs import WORKLOAD_FILTERED
from retrieval.tune.bucket_summary import bucket_names, check_strategies
from retrieval.tune.spec import SweepSpec
from retrieval.tune.units import Unit, plan_filtered_units
from retrieval.tune.workloads import EvalWork, SweepRequest, WorkloadKindDef, register_workload


def _declared(spec: SweepSpec) -> bool:
    return spec.filters is not None


def _plan(spec: SweepSpec, request: SweepRequest) -> list[Unit] | None:
    assert spec.filters is not None
    if spec.tune.strategy != "target":
        raise param_error("tune.strategy", "target for a spec with 'filters' (per-bucket "
                          "knob search; rwb eval measures a grid)", spec.tune.strategy,
                          where=spec.source)
    check_strategies(spec)
    return plan_filtered_units(spec, bucket_names(spec.filters))



def _eval_work(spec: SweepSpec, ds: Any, ev: Any) -> EvalWork:
    from retrieval.tune.runner import FilteredEval

    return FilteredEval(spec, ds, ev)

KIND = register_workload(WorkloadKindDef(WORKLOAD_FILTERED, _declared, _plan,
                                         section="filters", rank=400, eval_work=_eval_work))
