"""Latency-under-load plots (``rwb bench load`` runs): QPS vs p99 per config, corrected (from the
intended send time) and uncorrected (from the actual send), with the SLO line and each config's
capacity at the SLO; and the closed-loop curve (clients vs achieved QPS and p99)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from retrieval.reporting.html import Table
from retrieval.reporting.style import Colors, draw_target, empty_panel, finish, new_figure, note


def _f(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _pos(values: list[float]) -> bool:
    return any(math.isfinite(v) and v > 0 for v in values)


def qps_p99_curves(summary: Mapping[str, Any]) -> Figure:
    """Open loop: achieved QPS (x) vs p99 (ms, log y) per config, solid = corrected, dashed =
    uncorrected; the SLO as a dashed red line; a vertical dotted line at each capacity."""
    slo = (summary.get("slo") or {}).get("p99_ms")
    configs = summary.get("configs") or []
    fig, (ax,) = new_figure(1, 1, width=7.6, height=4.8)
    colors = Colors(str(c.get("label")) for c in configs)
    drawn = False
    for c in configs:
        label = str(c.get("label"))
        pts = sorted((p for p in c.get("points") or [] if p.get("mode") == "open"),
                     key=lambda p: _f(p.get("offered_qps")))
        if not pts:
            continue
        x = [_f(p.get("achieved_qps")) for p in pts]
        yc = [_f(p.get("p99_ms")) for p in pts]
        yu = [_f(p.get("p99_ms_uncorrected")) for p in pts]
        col = colors.color(label)
        ax.plot(x, yc, "-", marker=colors.marker(label), color=col,
                label=f"{label}: p99 corrected")
        ax.plot(x, yu, "--", marker=colors.marker(label), color=col, alpha=0.55, mfc="none",
                label=f"{label}: p99 uncorrected")
        cap = c.get("capacity_qps")
        if cap:
            ax.axvline(float(cap), color=col, ls=":", lw=1.2,
                       label=f"{label}: capacity {float(cap):.0f} QPS")
        drawn = True
    if not drawn:
        empty_panel(ax, "no open-loop points measured", title="QPS vs p99")
        return fig
    if _pos([_f(p.get("p99_ms")) for c in configs for p in c.get("points") or []]):
        ax.set_yscale("log")
    draw_target(ax, slo, f"SLO p99 {slo:g} ms" if slo else "SLO")
    finish(ax, title="Open loop: achieved QPS vs p99 latency", xlabel="achieved QPS",
           ylabel="p99 latency (ms)", legend_loc="below", legend_cols=2)
    note(fig, "Corrected: from each query's intended send time (coordinated omission "
         "accounted for); uncorrected: from its actual send. Capacity: highest offered rate "
         "whose corrected p99 met the SLO with recall at the target (found by a rate search).")
    return fig


def closed_loop_curves(summary: Mapping[str, Any]) -> Figure:
    """Closed loop: clients (x) vs achieved QPS (left) and p99 corrected/uncorrected (right)."""
    configs = summary.get("configs") or []
    fig, (ax, ax2) = new_figure(2, 1, width=5.2, height=4.2)
    colors = Colors(str(c.get("label")) for c in configs)
    drawn = False
    for c in configs:
        label = str(c.get("label"))
        pts = sorted((p for p in c.get("points") or [] if p.get("mode") == "closed"),
                     key=lambda p: _f(p.get("clients")))
        if not pts:
            continue
        x = [_f(p.get("clients")) for p in pts]
        col, mk = colors.color(label), colors.marker(label)
        ax.plot(x, [_f(p.get("achieved_qps")) for p in pts], "-", marker=mk, color=col,
                label=label)
        ax2.plot(x, [_f(p.get("p99_ms")) for p in pts], "-", marker=mk, color=col,
                 label=f"{label}: corrected")
        ax2.plot(x, [_f(p.get("p99_ms_uncorrected")) for p in pts], "--", marker=mk,
                 color=col, alpha=0.55, mfc="none", label=f"{label}: uncorrected")
        drawn = True
    if not drawn:
        empty_panel(ax, "no closed-loop points measured", title="Closed loop")
        empty_panel(ax2, "no closed-loop points measured")
        return fig
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
    slo = (summary.get("slo") or {}).get("p99_ms")
    draw_target(ax2, slo, f"SLO p99 {slo:g} ms" if slo else "SLO")
    finish(ax, title="Closed loop: throughput", xlabel="clients", ylabel="achieved QPS")
    finish(ax2, title="Closed loop: p99", xlabel="clients", ylabel="p99 latency (ms)",
           legend_loc="below")
    return fig


POINT_COLS = ["config", "mode", "clients", "offered_qps", "achieved_qps", "p50_ms", "p99_ms",
              "p99_ms_uncorrected", "p999_ms", "recall", "errors", "timeouts", "lag_p99_us",
              "client_cpu_cores", "meets_slo"]


def load_tables(summary: Mapping[str, Any]) -> list[tuple[str, Table]]:
    """Capacity per config, then every point (SLO-meeting points highlighted)."""
    configs = summary.get("configs") or []
    cap_rows = [[c.get("label"), c.get("backend"), c.get("capacity_qps"),
                 c.get("first_fail_qps"), c.get("limited_by")] for c in configs]
    pts = [p for c in configs for p in c.get("points") or []]
    rows = [[p.get(k) for k in POINT_COLS] for p in pts]
    hl = [bool(p.get("meets_slo")) for p in pts]
    slo = summary.get("slo") or {}
    return [
        ("Capacity at the SLO", Table(["config", "backend", "capacity_qps", "first_fail_qps",
                                       "limited_by"], cap_rows,
                                      caption=f"SLO: corrected p99 <= {slo.get('p99_ms')} ms, "
                                      f"recall >= {slo.get('target_recall')}")),
        ("Points", Table(POINT_COLS, rows, hl, caption="latency ms (corrected unless named); "
                         "lag us; points meeting the SLO highlighted")),
    ]


__all__ = ["closed_loop_curves", "load_tables", "qps_p99_curves"]
