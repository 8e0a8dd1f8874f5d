"""The summary.json of a live sweep (run kind ``live-sweep``, workload ``live``): its typed
model, registered with :func:`retrieval.runs.run_summary`."""

from __future__ import annotations

from typing import Any, ClassVar

from retrieval.runs.kinds import WORKLOAD_LIVE, RunKind, RunSummary, run_summary


@run_summary
class LiveSweepSummary(RunSummary):
    """summary.json of a live sweep: ``chosen`` (``search`` params in rwb's names, ``native``
    in the engine's, recall / lower bound / p50-p99 ms on the tuning queries; None when nothing
    meets the target), ``heldout_*``, ``probes``, ``knob``, and the ``live`` block (description,
    ``not_production_traffic``, snapshot figures, budget spent, query shift). Other keys as
    written (extra keys kept)."""

    KIND: ClassVar[RunKind] = RunKind("live-sweep")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("live", "probes")
    RANK: ClassVar[int] = 11

    kind: str = "live-sweep"
    workload: str = WORKLOAD_LIVE
    run_id: str | None = None
    name: str | None = None
    engine: str | None = None
    k: int | None = None
    target_recall: float | None = None
    chosen: dict[str, Any] | None = None
    live: dict[str, Any] | None = None


__all__ = ["LiveSweepSummary"]
