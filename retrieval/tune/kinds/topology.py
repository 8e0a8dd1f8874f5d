"""Workload kind ``topology`` (``topology:``): the same data as N segments, top-k merged
(:mod:`retrieval.tune.topology_run`); in this process, without an Optuna study."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.errors import ConfigError
from retrieval.runs import WORKLOAD_TOPOLOGY
from retrieval.tune.spec import SweepSpec
from retrieval.tune.units import Unit
from retrieval.tune.workloads import (
    SweepRequest,
    WorkloadKindDef,
    check_not_resumable,
    register_workload,
)


def _declared(spec: SweepSpec) -> bool:
    return spec.topology is not None


def _plan(spec: SweepSpec, request: SweepRequest) -> list[Unit] | None:
    from retrieval.tune.topology_run import check_topology_spec

    if spec.cold:
        raise ConfigError(f"{spec.source}: a spec has 'topology' or 'cold: true', not both")
    check_topology_spec(spec)
    check_not_resumable(spec, KIND, request)
    return None


def _study(*args: Any) -> dict[str, Any]:
    from retrieval.tune.topology_run import run_topology_study

    return run_topology_study(*args)


def _units(summary: Mapping[str, Any]) -> int:
    return len(summary.get("topology") or [])


NO_EVAL = ("a spec with 'topology' is measured by rwb sweep (a target search per topology / "
           "cold run), not rwb eval")

KIND = register_workload(WorkloadKindDef(WORKLOAD_TOPOLOGY, _declared, _plan, study=_study,
                                         units=_units, section="topology", no_eval=NO_EVAL,
                                         rank=200))
