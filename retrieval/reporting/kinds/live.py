"""The report of a live sweep (``live-sweep``): recall and its lower bound by knob value, the
probes, the collection, the budget and the query shift (:mod:`retrieval.reporting.live`)."""

from __future__ import annotations

from retrieval.live.summary import LiveSweepSummary
from retrieval.reporting import live
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables


@renders_figures(LiveSweepSummary.KIND)
def live_figures(run: Run, remeasure: bool) -> Figures:
    return list(live.figures(run.summary))


@renders_tables(LiveSweepSummary.KIND)
def live_tables(run: Run) -> Tables:
    return list(live.tables(run.summary))
