"""Workload kind ``scale`` (``scale:``): tune on nested samples, predict the knob at full N
(:mod:`retrieval.tune.scale_run`). Studied without an Optuna study; a killed study of the same
spec is run again in its own ``--out`` folder."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from retrieval.errors import ConfigError
from retrieval.redact import mask
from retrieval.runs import WORKLOAD_SCALE, declares_kind, workload_kind
from retrieval.specfile import parse_yaml, read_yaml
from retrieval.tune.spec import SweepSpec, resolved
from retrieval.tune.summary import SweepSummary
from retrieval.tune.units import Unit
from retrieval.tune.workloads import (
    EvalWork,
    SweepRequest,
    WorkloadKindDef,
    check_not_resumable,
    register_workload,
    workload_kinds,
)

log = logging.getLogger(__name__)


def _declared(spec: SweepSpec) -> bool:
    return spec.scale is not None


def _plan(spec: SweepSpec, request: SweepRequest) -> list[Unit] | None:
    from retrieval.tune.scale_run import check_scale_spec

    check_scale_spec(spec)
    check_not_resumable(spec, KIND, request)
    return None


def _study(*args: Any) -> dict[str, Any]:
    from retrieval.tune.scale_run import run_scale_study

    return run_scale_study(*args)


def _units(summary: Mapping[str, Any]) -> int:
    return len(summary["builds"])


def unfinished_study(spec: SweepSpec) -> Callable[[Path], bool]:
    """Whether a non-empty ``--out`` holds a killed or failed scale study of this very spec (its
    manifest says kind sweep with ``scale``, not complete; its spec.yaml is this spec): the same
    command then runs the study again there (its seeded samples give the same sizes; nothing of
    the killed run is mixed in, every file is rewritten)."""

    def check(path: Path) -> bool:
        try:
            manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
            recorded = read_yaml(path / "spec.yaml")
        except (OSError, ValueError, ConfigError):
            return False
        if not isinstance(manifest, dict) or not declares_kind(manifest, SweepSummary.KIND):
            return False
        if workload_kind(manifest) != WORKLOAD_SCALE or manifest.get("status") == "complete":
            return False
        same = parse_yaml(yaml.safe_dump(mask(resolved(spec)), sort_keys=False), "spec")
        if recorded != same:
            return False
        log.info("%s: a %s scale study of this spec; running it again there", path,
                 "killed" if manifest.get("status") == "running" else "failed")
        return True

    return check



def _eval_work(spec: SweepSpec, ds: Any, ev: Any) -> EvalWork:
    """rwb eval of a spec with 'scale' measures its grid at the full N, as the spec's other
    sections say (the scale section plays no part there)."""
    other = next(k for k in workload_kinds().values() if k is not KIND and k.declared(spec))
    assert other.eval_work is not None
    return other.eval_work(spec, ds, ev)

KIND = register_workload(WorkloadKindDef(WORKLOAD_SCALE, _declared, _plan, study=_study,
                                         units=_units, resumable=unfinished_study,
                                         section="scale", rank=300,
                                         eval_work=_eval_work))
