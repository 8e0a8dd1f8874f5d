"""The report of the cross-layer study (``rag-study``): its Pareto set, choice and trials."""

from __future__ import annotations

from retrieval.reporting.common import run_rows
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables
from retrieval.reporting.study import study_figures, study_tables
from retrieval.study.summary import StudySummary


@renders_figures(StudySummary.KIND)
def rag_study_figures(run: Run, remeasure: bool) -> Figures:
    return study_figures(run.summary, run_rows(run, "trials.parquet"),
                         run_rows(run, "grid.parquet"))


@renders_tables(StudySummary.KIND)
def rag_study_tables(run: Run) -> Tables:
    return study_tables(run.summary)
