"""The report of ``rwb bench churn`` (``bench-churn``): recall under churn per search step with
its fresh-build control, and the per-config tables."""

from __future__ import annotations

from retrieval.churn.summary import ChurnBenchSummary
from retrieval.reporting.churn import churn_tables, recall_over_steps
from retrieval.reporting.common import summary_table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables


@renders_figures(ChurnBenchSummary.KIND)
def churn_figures(run: Run, remeasure: bool) -> Figures:
    return [("churn_recall", "Recall under churn", recall_over_steps(run.summary),
             "Recall and its fresh-build control per search step, p99, maintenance "
             "marked.")]


@renders_tables(ChurnBenchSummary.KIND)
def churn_run_tables(run: Run) -> Tables:
    s = run.summary
    return [("Summary", summary_table(s, "configs")), *churn_tables(s)]
