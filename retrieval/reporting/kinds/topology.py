"""The report of a topology study (``sweep`` with ``workload: topology``: recall and the knob
against the segment count) and of a cold run (``workload: cold``: the cold-to-warm p99 curve,
per RAM budget)."""

from __future__ import annotations

from retrieval.reporting.html import Table
from retrieval.reporting.kinds.index import head_table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables
from retrieval.reporting.topology import cold_curve, recall_vs_segments
from retrieval.runs import WORKLOAD_COLD, WORKLOAD_TOPOLOGY
from retrieval.tune.summary import SweepSummary


@renders_figures(SweepSummary.KIND, WORKLOAD_TOPOLOGY)
def topology_figures(run: Run, remeasure: bool) -> Figures:
    return [("topology", "Recall vs segment count", recall_vs_segments(run.summary),
             (run.summary.get("topology_info") or {}).get("rule", ""))]


@renders_tables(SweepSummary.KIND, WORKLOAD_TOPOLOGY)
def topology_tables(run: Run) -> Tables:
    keys = ["label", "segments", "segment_size", "knob", "rule_knob", "recall", "recall_p5",
            "recall_lower", "p50_ms", "p95_ms", "p99_ms"]
    rows = [[r.get(k) for k in keys] + [(r.get("maintain") or {}).get("recall_change")]
            for r in run.summary.get("topology") or []]
    return [("Summary", head_table(run)),
            ("Topology", Table([*keys, "maintain recall change"], rows,
                               caption="per index and segment count: the cheapest knob meeting "
                                       "the target, held-out recall and single-query latency"))]


@renders_figures(SweepSummary.KIND, WORKLOAD_COLD)
def cold_figures(run: Run, remeasure: bool) -> Figures:
    return [("cold", "Cold-to-warm p99", cold_curve(run.summary),
             (run.summary.get("cold_info") or {}).get("definitions", ""))]


@renders_tables(SweepSummary.KIND, WORKLOAD_COLD)
def cold_tables(run: Run) -> Tables:
    keys = ["label", "search", "cold_p99_ms", "warm_p99_ms", "queries_to_warm", "drop_method",
            "drop_reason", "recall_lower"]
    rows = [[r.get(k) for k in keys] for r in run.summary.get("cold") or []]
    info = run.summary.get("cold_info") or {}
    tables = [("Summary", head_table(run)),
              ("Cold", Table(keys, rows, caption=info.get("definitions", "")))]
    bkeys = ["budget", "budget_bytes", "method", "served", "cold_p99_ms", "warm_p99_ms",
             "queries_to_warm", "limit_bytes", "shared_buffers", "limit_failures",
             "major_faults", "why"]
    brows = [[r.get("label"), r.get("search")] + [b.get(k) for k in bkeys]
             for r in run.summary.get("cold") or [] for b in r.get("budgets") or []]
    if brows:
        tables.append(("RAM budgets", Table(["label", "search", *bkeys], brows,
                                            caption=info.get("budget_method", ""))))
    return tables
