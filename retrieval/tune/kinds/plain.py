"""Workload kind ``plain``: unfiltered queries, measured through the Optuna study (the sweep's
units as :func:`retrieval.tune.units.plan_units` planned them)."""

from __future__ import annotations

from typing import Any

from retrieval.runs import WORKLOAD_PLAIN
from retrieval.tune.spec import SweepSpec
from retrieval.tune.units import Unit
from retrieval.tune.workloads import EvalWork, SweepRequest, WorkloadKindDef, register_workload


def _declared(spec: SweepSpec) -> bool:
    return True  # the last kind asked: a spec with no other workload is a plain one


def _plan(spec: SweepSpec, request: SweepRequest) -> list[Unit] | None:
    return None  # the sweep's own plan (every build config x search grid)



def _eval_work(spec: SweepSpec, ds: Any, ev: Any) -> EvalWork:
    from retrieval.tune.runner import PlainEval

    return PlainEval(spec, ds, ev)

def _summarise(spec: SweepSpec, ds: Any, split: Any, book: Any, plan: list[Unit],
               workload: Any, **names: str) -> dict[str, Any]:
    from retrieval.tune.summary import build_summary

    return build_summary(spec, ds, split, book, **names)


KIND = register_workload(WorkloadKindDef(WORKLOAD_PLAIN, _declared, _plan, rank=1000,
                                         eval_work=_eval_work, summarise=_summarise,
                                         checks_derived=True))
