"""The report of ``rwb bench load`` (``bench-load``): open-loop QPS against p99 per config,
the closed loop, and the capacity tables."""

from __future__ import annotations

from retrieval.bench.summary import LoadBenchSummary
from retrieval.reporting import loadcurves
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables


@renders_figures(LoadBenchSummary.KIND)
def load_figures(run: Run, remeasure: bool) -> Figures:
    s = run.summary
    return [("load_qps_p99", "QPS vs p99 under load", loadcurves.qps_p99_curves(s),
             "Open loop per config: corrected and uncorrected p99, SLO line, capacity."),
            ("load_closed", "Closed loop", loadcurves.closed_loop_curves(s),
             "Clients vs achieved QPS and p99.")]


@renders_tables(LoadBenchSummary.KIND)
def load_tables(run: Run) -> Tables:
    return loadcurves.load_tables(run.summary)
