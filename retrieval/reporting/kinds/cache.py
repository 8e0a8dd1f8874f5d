"""The report of ``rwb tune cache`` (``cache-tune``): the semantic cache's hit and false-hit
curve against the threshold, and the summary."""

from __future__ import annotations

from retrieval.cache.summary import CacheTuneSummary
from retrieval.reporting import rag
from retrieval.reporting.common import summary_table
from retrieval.reporting.kinds.adaptive import adaptive_section
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables


@renders_figures(CacheTuneSummary.KIND)
def cache_figures(run: Run, remeasure: bool) -> Figures:
    return [("cache_curve", "Semantic-cache hit / false-hit curve", rag.cache_curve(run.summary),
             "Chosen threshold: largest whose upper bound on the tuning false-hit rate "
             "meets the cap.")]


@renders_tables(CacheTuneSummary.KIND)
def cache_tables(run: Run) -> Tables:
    return [("Summary", summary_table(run.summary, "curve")), *adaptive_section(run)]
