"""Workload kind ``cold`` (``cold: true``): index file pages dropped before the first queries
(:mod:`retrieval.tune.cold`); in this process, without an Optuna study."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.runs import WORKLOAD_COLD
from retrieval.tune.spec import SweepSpec
from retrieval.tune.units import Unit
from retrieval.tune.workloads import (
    SweepRequest,
    WorkloadKindDef,
    check_not_resumable,
    register_workload,
)


def _declared(spec: SweepSpec) -> bool:
    return spec.cold


def _plan(spec: SweepSpec, request: SweepRequest) -> list[Unit] | None:
    from retrieval.tune.cold import check_cold_spec

    check_cold_spec(spec)
    check_not_resumable(spec, KIND, request)
    return None


def _study(*args: Any) -> dict[str, Any]:
    from retrieval.tune.cold import run_cold

    return run_cold(*args)


def _units(summary: Mapping[str, Any]) -> int:
    return len(summary.get("cold") or [])


NO_EVAL = ("a spec with 'cold: true' is measured by rwb sweep (a target search per topology / "
           "cold run), not rwb eval")

KIND = register_workload(WorkloadKindDef(WORKLOAD_COLD, _declared, _plan, study=_study,
                                         units=_units, section="cold", no_eval=NO_EVAL,
                                         rank=210))
