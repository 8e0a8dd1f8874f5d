"""Figures and tables of a cross-layer study run (``kind: rag-study``; used by ``rwb report``).

Lives in ``report/`` so the study never imports the report layer."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from retrieval.reporting.html import Table
from retrieval.reporting.style import (
    TARGET_COLOR,
    Colors,
    draw_target,
    empty_panel,
    finish,
    new_figure,
    note,
)

Row = Mapping[str, Any]
DEPTH_COLORS = Colors(str(d) for d in (0, 5, 10, 20, 30, 50, 100))


def _knob(summary: Row) -> str:
    names = [k for k in (summary.get("knobs") or {}) if k not in ("depth", "threshold",
                                                                  "threshold_unit")]
    return names[0] if names else "knob"


def _label(p: Row, knob: str) -> str:
    return f"{knob}={p.get(knob)} depth={p.get('depth')} t={float(p.get('threshold', 0)):.2f}"


def _scatter_panel(ax: Axes, trials: Sequence[Row], front: Sequence[Row], chosen: Row | None,
                   default: Row | None, x: str, xlabel: str, title: str, k: int,
                   fig: Figure, log_x: bool = False) -> None:
    feas = [t for t in trials if t.get("feasible")]
    infeas = [t for t in trials if not t.get("feasible")]
    if infeas:
        ax.scatter([t[x] for t in infeas], [t["ndcg_e2e"] for t in infeas], marker="x", s=18,
                   color="#bbbbbb", label=f"infeasible trials ({len(infeas)})", zorder=1)
    for depth in sorted({int(t["depth"]) for t in feas}):
        mine = [t for t in feas if int(t["depth"]) == depth]
        ax.scatter([t[x] for t in mine], [t["ndcg_e2e"] for t in mine], s=24, alpha=0.85,
                   color=DEPTH_COLORS.color(str(depth)), zorder=2,
                   label=f"feasible, depth {depth} ({len(mine)})")
    if front:
        pts = sorted(front, key=lambda p: p["tuning"][x])
        ax.scatter([p["tuning"][x] for p in pts], [p["tuning"]["ndcg_e2e"] for p in pts],
                   s=70, facecolors="none", edgecolors="#d62728", lw=1.4, zorder=3,
                   label=f"Pareto set (Optuna, {len(front)})")
    for cfg, marker, color, name in ((default, "D", "#ff7f0e", "untuned default"),
                                     (chosen, "*", "#2ca02c", "chosen")):
        if cfg:
            t = cfg["tuning"]
            ax.scatter([t[x]], [t["ndcg_e2e"]], marker=marker, s=220 if marker == "*" else 90,
                       color=color, edgecolor="black", zorder=5, label=name)
    if log_x and all(t.get(x, 0) > 0 for t in trials):
        ax.set_xscale("log")
    finish(ax, title=title, xlabel=xlabel, ylabel=f"end-to-end nDCG@{k} (tuning split, 0..1)",
           legend_loc="below", legend_cols=2)


def pareto_figure(summary: Row, trials: Sequence[Row]) -> Figure:
    """Trials in objective space (nDCG vs p95, nDCG vs cost) and the constraint plane."""
    fig, axes = new_figure(3, 1, width=5.8, height=6.2)
    knob = _knob(summary)
    k = int(str((summary.get("objectives") or [{}])[0].get("metric", "@10")).split("@")[-1])
    front = list(summary.get("pareto_set") or [])
    chosen, default = summary.get("chosen"), summary.get("default")
    if not trials:
        for ax in axes:
            empty_panel(ax, "no trials stored")
        return fig
    _scatter_panel(axes[0], trials, front, chosen, default, "p95_ms",
                   "end-to-end p95 latency (ms, log scale)", "Quality vs p95 latency", k, fig,
                   log_x=True)
    _scatter_panel(axes[1], trials, front, chosen, default, "usd_per_1k",
                   "cost per 1,000 queries (USD)", "Quality vs cost", k, fig)
    ax = axes[2]
    c = summary.get("constraints") or {}
    ok = [t for t in trials if t.get("feasible")]
    bad = [t for t in trials if not t.get("feasible")]
    ax.scatter([t["false_hit_upper_bound"] for t in bad], [t["recall_lb"] for t in bad],
               marker="x", s=18, color="#bbbbbb", label="infeasible")
    ax.scatter([t["false_hit_upper_bound"] for t in ok], [t["recall_lb"] for t in ok], s=20,
               color="#1f77b4", label="feasible")
    draw_target(ax, c.get("target_recall"), f"recall target = {c.get('target_recall')}")
    draw_target(ax, c.get("max_false_hit"), f"false-hit cap = {c.get('max_false_hit')}",
                axis="x")
    if c.get("target_recall") is not None and c.get("max_false_hit") is not None:
        ax.axvspan(0, float(c["max_false_hit"]), ymin=0, ymax=1, color="#2ca02c", alpha=0.06)
    for cfg, marker, color, name in ((default, "D", "#ff7f0e", "untuned default"),
                                     (chosen, "*", "#2ca02c", "chosen")):
        if cfg:
            t = cfg["tuning"]
            ax.scatter([t["false_hit_upper_bound"]], [t["recall_lb"]], marker=marker,
                       s=220 if marker == "*" else 90, color=color, edgecolor="black",
                       zorder=5, label=name)
    finish(ax, title="Constraints (feasible: left of the cap, above the target)",
           xlabel="false hits per probe: upper confidence bound (tuning)",
           ylabel=f"recall@{k} vs exact dense: lower bound (tuning)", legend_loc="below",
           legend_cols=2)
    fig.suptitle(f"Cross-layer study: {knob} x rerank depth x cache threshold "
                 f"({len(trials)} Optuna trials)", fontsize=12)
    o = summary.get("optuna") or {}
    ex = summary.get("exhaustive") or {}
    note(fig, f"sampler {o.get('sampler')}; Pareto set of the feasible trials (3 objectives: "
              f"nDCG max, p95 min, cost min). The exhaustive grid ({ex.get('grid_size')} configs)"
              f" has {ex.get('front_size')} front points; Optuna found "
              f"{ex.get('front_found_by_optuna')}.")
    return fig


def _p_text(sig: Row) -> str:
    text = str(sig.get("p_value_text") or f"{float(sig.get('p_value', 0.0)):.4g}")
    return text if text.startswith("<") else f"= {text}"


def comparison_figure(summary: Row) -> Figure:
    """The chosen config against the untuned default on the held-out split."""
    chosen, default = summary.get("chosen"), summary.get("default")
    fig, axes = new_figure(5, 1, width=2.9, height=4.0)
    if not chosen or not default:
        for ax in axes:
            empty_panel(ax, "no feasible config chosen")
        return fig
    knob = _knob(summary)
    panels = (("ndcg_e2e", "end-to-end nDCG@10", "0..1", "higher"),
              ("p95_ms", "p95 latency", "ms", "lower"),
              ("usd_per_1k", "cost / 1,000 queries", "USD", "lower"),
              ("hit_rate", "cache hit rate", "per probe", "higher"),
              ("false_hit_rate", "false-hit rate", "per probe", "lower"))
    cap = (summary.get("constraints") or {}).get("max_false_hit")
    for ax, (key, name, unit, better) in zip(axes, panels):
        vals = [float(default["heldout"][key]), float(chosen["heldout"][key])]
        bars = ax.bar(["default", "chosen"], vals, color=["#ff7f0e", "#2ca02c"],
                      edgecolor="black", lw=0.5)
        ax.bar_label(bars, labels=[f"{v:,.0f}" if v >= 100 else f"{v:.4g}" for v in vals],
                     fontsize=8)
        ax.set_ylim(0, max([*vals, 1e-09]) * 1.25)
        if key == "false_hit_rate":
            draw_target(ax, cap, f"cap {cap}")
        finish(ax, title=f"{name} ({better} is better)", xlabel="", ylabel=f"{name} ({unit})",
               legend=key == "false_hit_rate")
    sig = summary.get("significance") or {}
    fig.suptitle(
        f"Held-out: chosen ({_label(chosen, knob)}) vs untuned default "
        f"({_label(default, knob)})", fontsize=11)
    if sig:
        note(fig, f"{sig.get('test_name')} via ranx on {sig.get('n_queries')} held-out queries, "
                  f"retrieval-path {sig.get('metric')}: default {sig.get('default'):.4f}, chosen "
                  f"{sig.get('chosen'):.4f}, p {_p_text(sig)} "
                  f"({'significant' if sig.get('significant') else 'not significant'} at "
                  f"alpha {sig.get('alpha')}); W/T/L {sig.get('wins')}/{sig.get('ties')}/"
                  f"{sig.get('losses')}.")
    return fig


def front_surface(summary: Row, grid: Sequence[Row]) -> Figure:
    """Tuning path quality and miss latency over knob x depth (the cache-free part)."""
    fig, axes = new_figure(2, 1, width=6.2, height=4.6)
    knob = _knob(summary)
    if not grid:
        for ax in axes:
            empty_panel(ax, "no grid stored")
        return fig
    values = sorted({int(r[knob]) for r in grid})
    depths = sorted({int(r["depth"]) for r in grid})
    ndcg = np.full((len(depths), len(values)), np.nan)
    lat = np.full_like(ndcg, np.nan)
    rec = np.full_like(ndcg, np.nan)
    for r in grid:
        i, j = depths.index(int(r["depth"])), values.index(int(r[knob]))
        ndcg[i, j] = r["ndcg_path"]
        lat[i, j] = r["miss_p95_ms"]
        rec[i, j] = r["recall_lb"]
    target = (summary.get("constraints") or {}).get("target_recall")
    for ax, data, title, cmap, fmt, label in (
        (axes[0], ndcg, "retrieval-path nDCG@10 (tuning)", "viridis", ".3f", "nDCG@10"),
        (axes[1], lat, "miss-path p95 latency (ms)", "magma_r", ".0f", "p95 (ms)"),
    ):
        im = ax.imshow(data, origin="lower", aspect="auto", cmap=cmap)
        ax.set_xticks(range(len(values)), [str(v) for v in values])
        ax.set_yticks(range(len(depths)), [str(d) for d in depths])
        for i in range(len(depths)):
            for j in range(len(values)):
                v = data[i, j]
                if not math.isfinite(v):
                    continue
                r_, g_, b_, _ = im.cmap(im.norm(v))
                dark = 0.299 * r_ + 0.587 * g_ + 0.114 * b_ < 0.5
                ax.text(j, i, format(v, fmt), ha="center", va="center", fontsize=7.5,
                        color="white" if dark else "black")
                if target is not None and rec[i, j] >= target:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.0,
                                           edgecolor=TARGET_COLOR))
        fig.colorbar(im, ax=ax, shrink=0.85).set_label(label, fontsize=8)
        ax.set_title(title, fontsize=11)
        ax.set_xlabel(f"{knob} (index search knob)")
        ax.set_ylabel("rerank depth")
    fig.suptitle("Retrieval path: index knob x rerank depth (cache misses)", fontsize=12)
    note(fig, f"Cells outlined in red meet the recall target ({target}: bootstrap lower bound "
              f"of recall@10 against exact dense search, tuning queries).")
    return fig


def study_figures(summary: Row, trials: Sequence[Row] = (), grid: Sequence[Row] = ()
                  ) -> list[tuple[str, str, Figure, str]]:
    return [
        ("study_pareto", "Cross-layer study: trials, Pareto set and constraints",
         pareto_figure(summary, trials),
         "Tuning split. Objectives: end-to-end nDCG@10 (max), p95 latency (min), cost per "
         "1,000 queries (min); constraints: recall target, false-hit cap."),
        ("study_chosen_vs_default", "Chosen config vs untuned default (held-out)",
         comparison_figure(summary), (summary.get("significance") or {}).get("scope", "")),
        ("study_path_surface", "Retrieval path: knob x depth", front_surface(summary, grid),
         "Quality and miss latency of the retrieval path alone."),
    ]


def study_tables(summary: Row) -> list[tuple[str, Table]]:
    knob = _knob(summary)
    cols = [knob, "depth", "threshold", "ndcg_e2e", "ndcg_path", "recall_lb", "hit_rate",
            "false_hit_upper_bound", "p95_ms", "usd_per_1k"]
    chosen = summary.get("chosen") or {}
    key = (chosen.get(knob), chosen.get("depth"), chosen.get("threshold"))
    rows, hl = [], []
    for p in summary.get("pareto_set") or []:
        t = p["tuning"]
        rows.append([p[knob], p["depth"], p["threshold"], *[t[c] for c in cols[3:]]])
        hl.append((p[knob], p["depth"], p["threshold"]) == key)
    out = [("Pareto set (Optuna, tuning split)",
            Table(cols, rows, hl, caption="feasible non-dominated trials; chosen highlighted; "
                  "threshold = cosine distance; p95 in ms; cost in USD per 1,000 queries"))]
    comp = []
    for name in ("default", "chosen"):
        c = summary.get(name)
        if c:
            h = c["heldout"]
            comp.append([name, c[knob], c["depth"], c["threshold"], h["ndcg_e2e"],
                         h["ndcg_path"], h["recall"], h["hit_rate"], h["false_hit_rate"],
                         h["p95_ms"], h["usd_per_1k"]])
    out.append(("Held-out: chosen vs untuned default", Table(
        ["config", knob, "depth", "threshold", "ndcg_e2e", "ndcg_path", "recall", "hit_rate",
         "false_hit_rate", "p95_ms", "usd_per_1k"], comp)))
    sig = summary.get("significance")
    if sig:
        out.append(("Significance (ranx)", Table(["key", "value"],
                                                 [[k, v] for k, v in sig.items()])))
    models = summary.get("models") or {}
    out.append(("Models", Table(["what", "definition"], [[k, v] for k, v in models.items()])))
    return out


__all__ = ["comparison_figure", "front_surface", "pareto_figure", "study_figures",
           "study_tables"]
