"""Figures and tables of a scale study (a sweep run whose summary has ``scale``): knob(N) with
the fit and its band beside ceiling(N) with its trend, per build config."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from retrieval.reporting.html import Table
from retrieval.reporting.style import Colors, draw_target, finish, new_figure, note, params_text


def _name(b: Mapping[str, Any]) -> str:
    return f"{b['label']} {params_text(b['build'])}"


def _fit_y(fit: Mapping[str, Any], n: np.ndarray) -> np.ndarray:
    a, b = float(fit["a"]), float(fit["b"])
    if fit["model"] == "log":
        return a + b * np.log2(n)
    return np.exp(a + b * np.log(n))


def knob_and_ceiling(summary: Mapping[str, Any]) -> Figure:
    """Left: the cheapest knob at each sample size, the fitted curve (extrapolated to the full
    N and the growth sizes), the bootstrap band, predicted (open) and exact (filled star) at the
    full N. Right: the ceiling at each size, its trend, the measured ceiling at the full N and
    the target."""
    sc = summary["scale"]
    full = int(sc["full_n"])
    fig, (ax_k, ax_c) = new_figure(2, width=6.4, height=4.6)
    colors = Colors(_name(b) for b in summary["builds"])
    top = max([full, *[full * m for m in sc.get("predict_at") or []]])
    for b in summary["builds"]:
        name, color = _name(b), colors.color(_name(b))
        pts = [(r["n"], r["knob"]) for r in b["samples"] if r["knob"] is not None]
        frac = bool(b.get("fraction"))
        if pts:
            ax_k.plot(*zip(*pts, strict=True), marker=colors.marker(name), color=color, ls="",
                      label=name)
        fit = b.get("fit")
        if fit and pts and not frac:
            n = np.geomspace(min(p[0] for p in pts), top, 60)
            ax_k.plot(n, _fit_y(fit, n), color=color, lw=1, alpha=0.8)
        if b.get("band"):
            lo, hi = b["band"]
            ax_k.errorbar([full], [b["predicted"]], yerr=[[b["predicted"] - lo],
                                                          [hi - b["predicted"]]],
                          color=color, marker="o", mfc="white", capsize=3, lw=1)
        if b.get("exact") is not None:
            ax_k.plot([full], [b["exact"]], marker="*", ms=12, color=color, ls="")
        for p in b.get("predicted_at") or []:
            ax_k.plot([p["n"]], [p["knob"]], marker="o", mfc="white", color=color, ls="",
                      alpha=0.7)
        cs = [(r["n"], r["ceiling"]) for r in b["samples"] if r.get("ceiling") is not None]
        if cs:
            ax_c.plot(*zip(*cs, strict=True), marker=colors.marker(name), color=color,
                      label=name)
        trend = b.get("ceiling_trend") or {}
        if trend and cs:
            n = np.geomspace(min(c[0] for c in cs), top, 40)
            y = np.clip(float(trend["a"]) + float(trend["b_per_doubling"]) * np.log2(n), 0, 1)
            ax_c.plot(n, y, color=color, lw=1, ls=":", alpha=0.8)
        if b.get("ceiling_measured") and b.get("ceiling") is not None:
            ax_c.plot([full], [b["ceiling"]], marker="*", ms=12, color=color, ls="")
    for ax in (ax_k, ax_c):
        ax.set_xscale("log")
        ax.axvline(full, color="#888888", lw=0.8, ls="-.")
    draw_target(ax_c, summary.get("target_recall"), "target (recall lower bound)")
    knob = ", ".join(sorted({str(b["knob"]) for b in summary["builds"]}))
    finish(ax_k, title="knob(N): cheapest setting meeting the target", xlabel="base vectors N",
           ylabel=knob, legend_loc="below")
    finish(ax_c, title="ceiling(N): recall at the top of the knob range", xlabel="base vectors N",
           ylabel=f"recall@{summary.get('k')} lower bound", legend_loc="below")
    note(fig, "markers: samples; line: fitted model (dotted: ceiling trend); open circle with "
              "bar: predicted at the full N (vertical line) with its bootstrap band, and at the "
              "growth sizes; star: measured at the full N. IVF knobs are fitted as a fraction "
              "of nlist (no curve drawn).")
    return fig


def figures(summary: Mapping[str, Any]) -> list[tuple[str, str, Figure, str]]:
    return [("scale", "Scale study: knob(N) and ceiling(N)", knob_and_ceiling(summary),
             sc_caption(summary))]


def sc_caption(summary: Mapping[str, Any]) -> str:
    sc = summary["scale"]
    return (f"samples N = {', '.join(f'{n:,}' for n in sc['sizes'])}; full N = "
            f"{sc['full_n']:,}; {sc.get('rule', '')}")


def table(summary: Mapping[str, Any]) -> Table:
    rows = []
    for b in summary["builds"]:
        f = b.get("fit") or {}
        te = b.get("transfer_error")
        rows.append([
            b["label"], params_text(b["build"]), b["knob"],
            ", ".join(f"{r['n']:,}: {'-' if r['knob'] is None else r['knob']}"
                      for r in b["samples"]),
            f.get("formula", "-"), b.get("band") or "-", b.get("predicted"), b.get("exact"),
            None if te is None or not math.isfinite(te) else f"{100 * te:+.1f}%",
            (b.get("predicted_recall") or {}).get("heldout_lb"),
            (b.get("sample_knob_recall") or {}).get("heldout_lb"),
            b.get("ceiling"), b.get("message") or "",
        ])
    return Table(["index", "build", "knob", "knob at samples", "fit", "band", "predicted",
                  "exact", "transfer error", "held-out lb (predicted)",
                  "held-out lb (largest sample's knob)", "ceiling", "note"], rows,
                 caption="per build config: the knob at each sample size, the fit and its "
                         "bootstrap band, the predicted and exact knob at the full N, the "
                         "transfer error and the ceiling at the full N")


def tables(summary: Mapping[str, Any]) -> list[tuple[str, Table]]:
    return [("Scale study", table(summary))]


__all__ = ["figures", "knob_and_ceiling", "table", "tables"]
