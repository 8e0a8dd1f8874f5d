"""``rwb sweep --trace``: one OpenTelemetry span per completed trial of the sweep's Optuna study
(a measured search config on one build), made after the sweep from what the study recorded: the
trial's start and end (Optuna's datetimes, wall clock), its unit (backend, label, build), its
search knobs and results. Nothing is traced while the trials run (no cost on their path), and a
sweep run on Ray is traced the same way (the study holds every worker's trials)."""

from __future__ import annotations

import logging
from typing import Any

from retrieval.otel import OP, Tracing

log = logging.getLogger(__name__)


def _epoch_ns(dt: Any) -> int:
    return int(dt.timestamp() * 1e9)


def trace_trials(tracing: Tracing, storage_url: str, study_name: str, k: int) -> int:
    """A span per completed trial of study ``study_name`` in ``storage_url``; the number of
    spans made."""
    import optuna
    from optuna.trial import TrialState

    from retrieval.tune import trials as tr
    from retrieval.tune.storage import open_storage

    opened = open_storage(storage_url)
    study = optuna.load_study(study_name=study_name, storage=opened.storage)
    trials = study.get_trials(deepcopy=False)
    units: dict[str, Any] = {}
    for t in trials:  # a unit's definition sits on its first trial
        if tr.UNIT_DEF in t.user_attrs:
            units.setdefault(str(t.user_attrs[tr.UNIT]), tr.unit_from_dict(
                t.user_attrs[tr.UNIT_DEF]))
    n = 0
    for t in trials:
        if (t.state != TrialState.COMPLETE or tr.RESULT not in t.user_attrs
                or t.datetime_start is None or t.datetime_complete is None):
            continue
        res = t.user_attrs[tr.RESULT]
        u = units.get(str(t.user_attrs.get(tr.UNIT)))
        backend = u.backend if u is not None else None
        label = u.label if u is not None else str(t.user_attrs.get(tr.UNIT))
        attrs: dict[str, Any] = {
            OP: "retrieval", "gen_ai.data_source.id": label, "gen_ai.request.top_k": k,
            "rwb.backend": backend, "rwb.trial": t.number, "rwb.unit": t.user_attrs.get(tr.UNIT),
            "rwb.worker": t.user_attrs.get(tr.WORKER), "rwb.bench": "sweep",
            **{f"rwb.build.{kk}": v for kk, v in (dict(u.build) if u is not None else {}).items()},
            **{f"rwb.knob.{kk}": v for kk, v in (res.get("search") or {}).items()},
            **{f"rwb.{kk}": res.get(kk) for kk in ("recall", "recall_lb", "p50_ms", "p95_ms",
                                                   "p99_ms", "qps", "build_s", "meets")},
        }
        tracing.span(f"retrieval {label}", _epoch_ns(t.datetime_start),
                     _epoch_ns(t.datetime_complete), attrs, epoch=True)
        n += 1
    log.info("sweep: %d trial spans", n)
    return n


__all__ = ["trace_trials"]
