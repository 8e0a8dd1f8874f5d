"""Workload kind ``tenants`` (``tenants:``): layouts compared per tenant
(:mod:`retrieval.tune.tenants_run`), at the full N, without an Optuna study."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.errors import ConfigError, param_error
from retrieval.runs import WORKLOAD_TENANTS
from retrieval.tune.spec import SweepSpec
from retrieval.tune.units import Unit
from retrieval.tune.workloads import (
    SweepRequest,
    WorkloadKindDef,
    check_not_resumable,
    register_workload,
)


def _declared(spec: SweepSpec) -> bool:
    return spec.tenants is not None


def _plan(spec: SweepSpec, request: SweepRequest) -> list[Unit] | None:
    if spec.target_recall is None:
        raise param_error("target_recall", "a recall target in (0, 1] for a spec with "
                          "'tenants'", None, where=spec.source)
    for field, value in (("filters", spec.filters), ("scale", spec.scale),
                         ("topology", spec.topology), ("cold", spec.cold or None)):
        if value is not None:
            raise ConfigError(f"{spec.source}: field 'tenants': a tenants study filters by "
                              f"tenant itself and runs at the full N; drop '{field}' (or "
                              f"'tenants')")
    check_not_resumable(spec, KIND, request)
    return None


def _study(*args: Any) -> dict[str, Any]:
    from retrieval.tune.tenants_run import run_tenants_study

    return run_tenants_study(*args)


def _units(summary: Mapping[str, Any]) -> int:
    return len(summary["layouts"])


NO_EVAL = ("field 'tenants': a tenants study compares layouts per tenant and runs under rwb "
           "sweep (with target_recall); rwb eval measures one shared index: drop 'tenants' "
           "for it")

KIND = register_workload(WorkloadKindDef(WORKLOAD_TENANTS, _declared, _plan, study=_study,
                                         units=_units, section="tenants", rank=100,
                                         no_eval=NO_EVAL))
