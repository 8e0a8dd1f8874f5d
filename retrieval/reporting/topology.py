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


__all__ = ["cold_curve", "recall_vs_segments"]
