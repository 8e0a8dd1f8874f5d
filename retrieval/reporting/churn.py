"""Churn plots (``rwb bench churn`` runs): per config, recall at each search step with its
fresh-build control, p99 latency (right axis), the target, and the maintenance steps marked;
and the per-step table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from retrieval.reporting.html import Table
from retrieval.reporting.style import Colors, draw_target, empty_panel, finish, new_figure, note


def _f(v: Any) -> float:
    return float("nan") if v is None else float(v)


def recall_over_steps(summary: Mapping[str, Any]) -> Figure:
    """One panel per config: recall (solid) and control recall (hollow markers) per search
    step (x: runbook step), p99 ms on the right axis (dotted), maintenance steps as grey
    vertical lines, the target as a dashed red line."""
    configs = list(summary.get("configs") or [])
    fig, axes = new_figure(1, max(1, len(configs)), width=7.6, height=3.6)
    if not configs:
        empty_panel(axes[0], "no configs measured", title="Recall under churn")
        return fig
    colors = Colors(str(c.get("label")) for c in configs)
    for ax, c in zip(axes, configs, strict=False):
        label = str(c.get("label"))
        steps = c.get("steps") or []
        s = [r for r in steps if r.get("op") == "search"]
        if not s:
            empty_panel(ax, "no search step recorded", title=label)
            continue
        col = colors.color(label)
        x = [r["step"] for r in s]
        ax.plot(x, [_f(r.get("recall")) for r in s], "-", marker="o", color=col,
                label="recall")
        ctl = [(r["step"], _f(r.get("control_recall"))) for r in s
               if r.get("control_recall") is not None]
        if ctl:
            ax.plot([p[0] for p in ctl], [p[1] for p in ctl], "none", marker="s", mfc="none",
                    color="black", label="control (fresh build)")
        for i, r in enumerate(r for r in steps if r.get("op") == "maintain"):
            ax.axvline(r["step"], color="#888888", lw=1.0, ls="-",
                       label="maintain" if i == 0 else None)
        draw_target(ax, summary.get("target_recall"), "target")
        right = ax.twinx()
        p99 = [_f(r.get("p99_ms")) for r in s]
        right.plot(x, p99, ":", marker=".", color="#555555", label="p99 ms")
        right.set_ylabel("p99 latency (ms)")
        if any(math.isfinite(v) for v in p99):
            right.set_ylim(bottom=0)
        knob = f", {c.get('knob')} {c.get('knob_value')}" if c.get("knob") else ""
        finish(ax, title=f"{label} ({c.get('backend')}{knob})", xlabel="runbook step",
               ylabel=f"recall@{summary.get('k')}", legend_loc="lower left")
    note(fig, "Recall against the exact top-k of the live set at each search step; control = a "
         "fresh build of the same params on the live set (drift = first recall - control, "
         "damage = control - recall, 0 when within control_spread, how far a second fresh build "
         "with another seed differs). p99: single-query search, ms.")
    return fig


def churn_tables(summary: Mapping[str, Any]) -> list[tuple[str, Table]]:
    cols = ["step", "live", "recall", "recall_lower", "control_recall", "control_spread",
            "drift", "damage", "p99_ms", "short_queries", "dead_fraction", "tuned_knob"]
    out = []
    for c in summary.get("configs") or []:
        rows = [[r.get(k) for k in cols] for r in c.get("steps") or [] if r.get("op") == "search"]
        advice = (c.get("advice") or {}).get("line", "")
        out.append((f"{c.get('label')}: per search step",
                    Table(cols, rows, caption=f"advice: {advice}")))
    return out


__all__ = ["churn_tables", "recall_over_steps"]
