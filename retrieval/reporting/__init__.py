"""Plots and reports of rwb runs (matplotlib, headless).

- :mod:`retrieval.reporting.ann`: recall vs p95 latency / QPS with the Pareto front and target,
  per-query recall, parameter surfaces, build costs;
- :mod:`retrieval.reporting.rag`: embedding batch sweep, fan-out speedups, rerank-depth curve,
  semantic-cache curve;
- :mod:`retrieval.reporting.study`: a cross-layer study's Pareto set, choice and trials;
- :mod:`retrieval.reporting.build`: ``write_report`` (``rwb report``) picks the figures a run holds
  and writes PNGs plus one self-contained HTML page.

Every plot function returns a :class:`matplotlib.figure.Figure`; notebooks call the same
functions, so no plotting logic lives only in a notebook.
"""

from retrieval.reporting.build import ReportResult, write_report
from retrieval.reporting.load import Run, load_run

__all__ = ["ReportResult", "Run", "load_run", "write_report"]
