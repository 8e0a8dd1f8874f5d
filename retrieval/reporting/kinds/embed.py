"""The report of ``rwb bench embed`` (``bench-embed``): the batching sweep, its settings and the
runtimes compared."""

from __future__ import annotations

from typing import Any

from retrieval.bench.summary import EmbedBenchSummary
from retrieval.reporting import rag
from retrieval.reporting.common import run_rows, scalar_table, summary_table, typed
from retrieval.reporting.html import Table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables


@renders_figures(EmbedBenchSummary.KIND)
def embed_figures(run: Run, remeasure: bool) -> Figures:
    rows = typed(run, EmbedBenchSummary).rows or run_rows(run, "results.parquet")
    return [("embed_batch_sweep", "Embedding batch sweep",
             rag.embed_batch_sweep(rows, run.summary),
             "Throughput and per-call latency per batching setting.")]


@renders_tables(EmbedBenchSummary.KIND)
def embed_tables(run: Run) -> Tables:
    s = run.summary
    e = typed(run, EmbedBenchSummary)
    if not e.rows:
        return [("Summary", summary_table(s, "curve"))]
    cols = ["setting", "mode", "batch_size", "token_budget", "texts_per_s", "tokens_per_s",
            "call_p50_ms", "call_p95_ms", "padding_waste", "speedup_vs_single"]
    rows = [[r.get(c) for c in cols] for r in e.rows]
    best = [r.get("setting") == e.best_setting for r in e.rows]
    out = [("Summary", scalar_table({k: v for k, v in s.items() if k != "rows"})),
           ("Settings", Table(cols, rows, best, caption="best setting highlighted; "
                              "latency per call (ms), throughput per second"))]
    if e.runtimes:
        out.append(("Runtimes", _runtimes_table(e.runtimes)))
    return out


def _runtimes_table(rt: dict[str, Any]) -> Table:
    cols = ["runtime", "best_setting", "texts_per_s", "call_p50_ms", "call_p95_ms",
            "speedup_vs_library", "cos_dist_mean", "recall_at_k", "within_tolerance"]
    by = rt.get("by_runtime", {})
    rows = [[name, e.get("best_setting"), e.get("texts_per_s"), e.get("call_p50_ms"),
             e.get("call_p95_ms"), e.get("speedup_vs_library"),
             e.get("drift", {}).get("cos_dist_mean"), e.get("drift", {}).get("recall_at_k"),
             e.get("within_tolerance")] for name, e in by.items()]
    fastest = rt.get("fastest_within_tolerance", {}).get("runtime")
    return Table(cols, rows, [name == fastest for name in by],
                 caption=f"drift and speedups vs torch fp32 (speedup_vs_library: over "
                         f"encode(batch_size=32)); fastest within tolerance highlighted "
                         f"({rt.get('tolerance', {}).get('rule', '')})")
