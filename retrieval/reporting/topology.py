"""Figures of a topology study (recall and the knob against the segment count) and of a cold
run (the cold-to-warm p99 per RAM budget): summaries of ``sweep`` runs with ``workload:
topology`` / ``cold``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from retrieval.reporting.style import Colors, draw_target, finish, new_figure, note, params_text


def _by_label(rows: list[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(f"{r['label']} {params_text(r.get('build') or {})}", []).append(r)
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
    """Left: the rolling p99 (ms, windows of 32 queries) from the page drop on, per index, with
    its warm p99 (dotted) and the queries until warm (vertical); right: the first window's p99
    (cold) and the warm p99 per RAM budget."""
    fig, (ax, ax_b) = new_figure(2, width=6.4, height=4.6)
    rows = summary.get("cold") or []
    names = [f"{r['label']} {params_text(r.get('search') or {})}" for r in rows]
    colors = Colors(names)
    for name, r in zip(names, rows, strict=True):
        color = colors.color(name)
        curve = r.get("p99_curve") or []
        if curve:
            ax.plot(*zip(*curve, strict=True), color=color, label=name)
        ax.axhline(r["warm_p99_ms"], color=color, ls=":", lw=1)
        if r.get("queries_to_warm") is not None:
            ax.axvline(r["queries_to_warm"], color=color, ls="--", lw=0.8)
        budgets = r.get("budgets") or []
        pts = [(b["budget"], b["cold_p99_ms"], b["warm_p99_ms"]) for b in budgets
               if b.get("cold_p99_ms") is not None and b.get("warm_p99_ms") is not None]
        for b in budgets:
            if b.get("served") is False:  # OOM-killed: the budget is too small to serve
                ax_b.annotate("OOM", (b["budget"], 0.02), xycoords=("data", "axes fraction"),
                              color=color, ha="center", fontsize=7)
        if pts:
            x, cold, warm = zip(*pts, strict=True)
            ax_b.plot(x, cold, marker=colors.marker(name), color=color, label=f"{name} cold")
            ax_b.plot(x, warm, marker=colors.marker(name), color=color, ls=":", mfc="white")
    shown = [b["budget"] for r in rows for b in r.get("budgets") or []]
    if shown:  # every budget on the axis, an OOM-killed one too
        ax_b.set_xlim(min(shown) - 0.05, max(shown) + 0.05)
    for a in (ax, ax_b):
        a.set_yscale("log")
    finish(ax, title="cold-to-warm p99", xlabel="queries searched since the page drop",
           ylabel="rolling p99 ms (32 queries)", legend_loc="below")
    finish(ax_b, title="p99 per RAM budget", xlabel="RAM budget (share of the index bytes)",
           ylabel="p99 ms", legend_loc="below")
    method = str((summary.get("cold_info") or {}).get("budget_method") or "fadvise-window")
    note(fig, "left: dotted, the warm p99; dashed, queries to warm (p99 within 1.2x of warm). "
              "right: solid, the first window after the drop; dotted, warm; OOM: the budget "
              f"was too small to serve (budgets by {method.split(':')[0]})")
    return fig


__all__ = ["cold_curve", "recall_vs_segments"]
