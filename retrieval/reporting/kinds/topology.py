"""The report of a topology study (``sweep`` with ``workload: topology``: recall and the knob
against the segment count) and of a cold run (``workload: cold``: the cold-to-warm p99 curve,
per RAM budget)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from retrieval.reporting.html import Table
from retrieval.reporting.kinds.index import head_table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables
from retrieval.reporting.style import Colors, draw_target, finish, new_figure, note
from retrieval.runs import WORKLOAD_COLD, WORKLOAD_TOPOLOGY
from retrieval.tune.summary import SweepSummary


def _by_label(rows: list[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(f"{r['label']} {r.get('build') or ''}", []).append(r)
    return out


def recall_vs_segments(summary: Mapping[str, Any]) -> Figure:
    """Left: recall (mean, P5, lower bound) at each topology's chosen knob against the segment
    count; right: the chosen knob and the per-segment rule's knob."""
    fig, (ax_r, ax_k) = new_figure(2, width=6.4, height=4.6)
    groups = _by_label(summary.get("topology") or [])
    colors = Colors(groups)
    for name, rows in groups.items():
        color, marker = colors.color(name), colors.marker(name)
        ok = [r for r in rows if r.get("knob") is not None]
        if ok:
            s = [r["segments"] for r in ok]
            ax_r.plot(s, [r["recall"] for r in ok], marker=marker, color=color, label=name)
            ax_r.plot(s, [r["recall_lower"] for r in ok], color=color, ls="--", lw=1)
            ax_r.plot(s, [r["recall_p5"] for r in ok], color=color, ls=":", lw=1)
            ax_k.plot(s, [r["knob"] for r in ok], marker=marker, color=color, label=name)
            ruled = [(r["segments"], r["rule_knob"]) for r in ok if r.get("rule_knob") is not None]
            if ruled:
                ax_k.plot(*zip(*ruled, strict=True), color=color, ls="--", lw=1)
    for ax in (ax_r, ax_k):
        ax.set_xscale("log", base=2)
    draw_target(ax_r, summary.get("target_recall"), "target (recall lower bound)")
    finish(ax_r, title="recall at the chosen knob", xlabel="segments",
           ylabel=f"recall@{summary.get('k')} (held-out)", legend_loc="below")
    finish(ax_k, title="cheapest knob per topology", xlabel="segments", ylabel="knob",
           legend_loc="below")
    note(fig, "solid: mean recall / chosen knob; dashed: lower bound / the per-segment rule's "
              "knob; dotted: P5 recall")
    return fig


def cold_curve(summary: Mapping[str, Any]) -> Figure:
    """p99 (ms) per index: cold (first window after the drop), warm, and per RAM budget."""
    fig, (ax,) = new_figure(1, width=6.4, height=4.6)
    rows = summary.get("cold") or []
    names = [f"{r['label']} {r.get('search')}" for r in rows]
    colors = Colors(names)
    for name, r in zip(names, rows, strict=True):
        pts = [(b["budget"], b["cold_p99_ms"]) for b in r.get("budgets") or []]
        color = colors.color(name)
        ax.plot([0], [r["cold_p99_ms"]], marker="o", color=color, ls="", label=f"{name} cold")
        ax.axhline(r["warm_p99_ms"], color=color, ls=":", lw=1)
        if pts:
            ax.plot(*zip(*pts, strict=True), marker=colors.marker(name), color=color)
    ax.set_yscale("log")
    finish(ax, title="cold-to-warm p99", xlabel="RAM budget (share of index bytes; 0: cold)",
           ylabel="p99 ms (first window)", legend_loc="below")
    note(fig, "dotted: warm p99; circles: p99 of the first window after the page drop; line: "
              "the same per RAM budget")
    return fig


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
            "recall_lower"]
    rows = [[r.get(k) for k in keys] for r in run.summary.get("cold") or []]
    return [("Summary", head_table(run)),
            ("Cold", Table(keys, rows, caption=(run.summary.get("cold_info") or {})
                           .get("definitions", "")))]
