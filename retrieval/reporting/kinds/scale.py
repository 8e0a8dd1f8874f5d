"""The report of a scale study (``sweep`` with ``workload: scale``): the knob and the recall
ceiling against the collection size, the fitted rules, and the exports."""

from __future__ import annotations

from retrieval.reporting import scale
from retrieval.reporting.kinds.index import exports_section, head_table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables
from retrieval.runs import WORKLOAD_SCALE
from retrieval.tune.summary import SweepSummary


@renders_figures(SweepSummary.KIND, WORKLOAD_SCALE)
def scale_figures(run: Run, remeasure: bool) -> Figures:
    return scale.figures(run.summary)


@renders_tables(SweepSummary.KIND, WORKLOAD_SCALE)
def scale_tables(run: Run) -> Tables:
    return [("Summary", head_table(run)), *scale.tables(run.summary), *exports_section(run)]
