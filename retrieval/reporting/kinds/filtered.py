"""The report of a filtered workload (``eval`` or ``sweep`` with ``workload: filtered``): recall
and p95 latency against selectivity per bucket, and the operating-point tables."""

from __future__ import annotations

from retrieval.reporting import filtered
from retrieval.reporting.kinds.index import head_table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables
from retrieval.runs import WORKLOAD_FILTERED
from retrieval.tune.summary import EvalSummary, SweepSummary


@renders_figures(EvalSummary.KIND, WORKLOAD_FILTERED)
@renders_figures(SweepSummary.KIND, WORKLOAD_FILTERED)
def filtered_figures(run: Run, remeasure: bool) -> Figures:
    return filtered.figures(run.summary)


@renders_tables(EvalSummary.KIND, WORKLOAD_FILTERED)
@renders_tables(SweepSummary.KIND, WORKLOAD_FILTERED)
def filtered_tables(run: Run) -> Tables:
    return [("Summary", head_table(run)), *filtered.tables(run.summary)]
