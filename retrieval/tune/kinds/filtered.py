"""Workload kind ``filtered`` (``filters:``): per entry x build x strategy x selectivity bucket,
measured through the Optuna study (strategy target only)."""

from __future__ import annotations

import json
from typing import Any

from retrieval.errors import param_error
from retrieval.runs import WORKLOAD_FILTERED
from retrieval.tune.bucket_summary import bind_spec_buckets, bucket_names, check_strategies
from retrieval.tune.spec import SweepSpec
from retrieval.tune.units import Unit, plan_filtered_units
from retrieval.tune.workloads import EvalWork, SweepRequest, WorkloadKindDef, register_workload
from retrieval.workload import Workload, filtered_workload


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

def _bind(spec: SweepSpec, ds: Any, ev: Any) -> Workload:
    """The spec's buckets bound to ``ds``, with their exact filtered ground truth."""
    assert spec.filters is not None
    buckets = bind_spec_buckets(spec, ds, ev.gt.ids[:, 0])
    return filtered_workload(buckets, spec.filters.strategies, base=ds.base,
                             queries=ds.queries, metric=ds.metric, k=spec.k,
                             fingerprint=ds.fingerprint)


def _summarise(spec: SweepSpec, ds: Any, split: Any, book: Any, plan: list[Unit],
               workload: Workload, **names: str) -> dict[str, Any]:
    from retrieval.tune.summary import build_filtered_summary

    return build_filtered_summary(spec, ds, split, book, plan, list(workload.buckets), **names)


def _table_row(row: dict[str, Any]) -> dict[str, Any]:
    """A filtered step's row for trials.parquet: its build and search as sorted JSON."""
    return {**{k: v for k, v in row.items() if k not in ("build", "search")},
            "build": json.dumps(row["build"], sort_keys=True),
            "search": json.dumps(row["search"], sort_keys=True)}


KIND = register_workload(WorkloadKindDef(WORKLOAD_FILTERED, _declared, _plan,
                                         section="filters", rank=400, eval_work=_eval_work,
                                         bind=_bind, summarise=_summarise,
                                         table_row=_table_row))
