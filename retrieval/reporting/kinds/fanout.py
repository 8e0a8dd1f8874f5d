"""The report of ``rwb bench fanout`` (``bench-fanout``): per-query latency of each fan-out
mode and its speedup."""

from __future__ import annotations

from retrieval.bench.summary import FanoutBenchSummary
from retrieval.reporting import rag
from retrieval.reporting.common import scalar_table, typed
from retrieval.reporting.html import Table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables


@renders_figures(FanoutBenchSummary.KIND)
def fanout_figures(run: Run, remeasure: bool) -> Figures:
    return [("fanout_speedups", "Fan-out speedups", rag.fanout_speedups(run.summary),
             "Per-query latency of serial, thread-pool and asyncio fan-out.")]


@renders_tables(FanoutBenchSummary.KIND)
def fanout_tables(run: Run) -> Tables:
    s = run.summary
    modes = typed(run, FanoutBenchSummary).modes
    cols = ["p50_ms", "p95_ms", "p99_ms", "qps", "speedup_p50", "cpu_cores",
            "child_cpu_cores"]
    rows = [[m, *[v.get(c) for c in cols]] for m, v in modes.items()]
    return [("Modes", Table(["mode", *cols], rows, caption="latency per query (ms)")),
            ("Summary", scalar_table({k: v for k, v in s.items() if k != "modes"}))]
