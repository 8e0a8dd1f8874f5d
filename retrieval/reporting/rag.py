"""RAG-layer plots: embedding batch sweep, fan-out speedups, rerank-depth curve, semantic-cache
hit / false-hit curve. Each takes the summary (or rows) a run directory stores and returns a
:class:`matplotlib.figure.Figure` with units on the axes, a legend and the goal/target drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from retrieval.reporting.bands import wilson_interval
from retrieval.reporting.style import (
    TARGET_COLOR,
    Colors,
    draw_target,
    empty_panel,
    finish,
    log_ok,
    new_figure,
    note,
)

#: goals stated in the issues (ratios measured in one run); drawn as the target lines
EMBED_SPEEDUP_GOAL = 4.5
FANOUT_SPEEDUP_GOAL = 1.7


def _f(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _log2_x(ax: Any) -> None:
    """A log2 batch-size axis whose ticks read 8, 32, 128 (not 2^3)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


# --------------------------------------------------------------------------- embedding


def embed_batch_sweep(
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any] | None = None,
    *,
    goal_speedup: float = EMBED_SPEEDUP_GOAL,
    title: str | None = None,
) -> Figure:
    """Left: texts/s against batch size (log2 x) for fixed-size and length-sorted batches, with
    one-at-a-time calls, the library ``encode()`` baseline and the goal (``goal_speedup`` x the
    one-at-a-time rate); token-budget batches sit at their mean batch size. Right: per-call p95
    latency (ms) against batch size, and padding waste."""
    fig, (ax, ax2) = new_figure(2, 1, width=6.6, height=4.6)
    head = title or "Embedding throughput vs batch size"
    # torch fp32 settings and the bf16 check; other runtimes are in the runtimes table
    rows = [dict(r) for r in rows if r.get("runtime", "torch") == "torch"
            or str(r.get("setting", "")).endswith("@bf16")]
    if not rows:
        empty_panel(ax, "no embedding rows", title=head)
        empty_panel(ax2, "no embedding rows")
        return fig
    colors = Colors(["batch", "sorted", "tokens", "library", "single", "bf16"])
    single = next((r for r in rows if r.get("mode") == "single"), None)
    lib = next((r for r in rows if r.get("mode") == "library"), None)
    for mode, label in (("batch", "fixed-size batches"), ("sorted", "length-sorted batches")):
        sub = sorted((r for r in rows if r.get("mode") == mode and r.get("dtype", "fp32") ==
                      "fp32" and r.get("batch_size")), key=lambda r: r["batch_size"])
        if not sub:
            continue
        xs = [r["batch_size"] for r in sub]
        ax.plot(xs, [r["texts_per_s"] for r in sub], marker="o", color=colors.color(mode),
                label=label)
        ax2.plot(xs, [_f(r.get("call_p95_ms")) for r in sub], marker="o",
                 color=colors.color(mode), label=f"{label}: per-call p95")
    tok = [r for r in rows if r.get("mode") == "tokens" and r.get("dtype", "fp32") == "fp32"]
    for i, r in enumerate(tok):
        x = float(r.get("mean_batch") or 1.0)
        ax.scatter([x], [r["texts_per_s"]], marker="D", s=50, color=colors.color("tokens"),
                   zorder=4, label="token-budget batches (at mean batch size)" if i == 0 else None)
        ax.annotate(f"{r.get('token_budget')} tokens", (x, r["texts_per_s"]), fontsize=7.5,
                    textcoords="offset points", xytext=(5, -11))
    bf = [r for r in rows if r.get("dtype") == "bf16"]
    for r in bf:
        x = float(r.get("batch_size") or r.get("mean_batch") or 1.0)
        ax.scatter([x], [r["texts_per_s"]], marker="*", s=160, color=colors.color("bf16"),
                   edgecolor="black", zorder=5, label=f"bf16 ({r.get('setting')})")
    if single is not None:
        ax.axhline(single["texts_per_s"], color="#555555", ls=":", lw=1.4,
                   label=f"one text per call: {single['texts_per_s']:.0f} texts/s")
        draw_target(ax, goal_speedup * float(single["texts_per_s"]),
                    f"goal: {goal_speedup:g}x one-at-a-time")
    if lib is not None:
        ax.axhline(lib["texts_per_s"], color=colors.color("library"), ls="-.", lw=1.3,
                   label=f"library encode(batch_size={lib.get('batch_size')}): "
                         f"{lib['texts_per_s']:.0f} texts/s")
    _log2_x(ax)
    finish(ax, title=head, xlabel="batch size (texts per call, log2 scale)",
           ylabel="throughput (texts / s)", legend_loc="lower right")
    ax.set_ylim(bottom=0)
    waste = [(r["batch_size"], _f(r.get("padding_waste"))) for r in rows
             if r.get("mode") == "batch" and r.get("batch_size")]
    if waste:
        ax3 = ax2.twinx()
        ws = sorted(waste)
        ax3.plot([w[0] for w in ws], [100 * w[1] for w in ws], ls="--", color="#999999",
                 marker="x", label="padding waste, fixed-size (%)")
        ax3.set_ylabel("padding waste (% of padded tokens)")
        ax3.set_ylim(0, 100)
        ax3.legend(fontsize=8, loc="center right")
    _log2_x(ax2)
    if log_ok(_f(r.get("call_p95_ms")) for r in rows if r.get("mode") in ("batch", "sorted")):
        ax2.set_yscale("log")
    finish(ax2, title="Per-call latency vs batch size",
           xlabel="batch size (texts per call, log2 scale)",
           ylabel="per-call p95 latency (ms, log scale)", legend_loc="upper left")
    if summary:
        note(fig, f"best: {summary.get('best_setting')} at "
                  f"{_f(summary.get('best_texts_per_s')):.0f} texts/s = "
                  f"{_f(summary.get('speedup')):.2f}x one-at-a-time; batched vs single max abs "
                  f"diff {_f(summary.get('max_abs_diff')):.2e} (tolerance "
                  f"{_f(summary.get('tolerance')):.0e}); model {summary.get('model_id')}")
    return fig


# --------------------------------------------------------------------------- fan-out


def fanout_speedups(
    summary: Mapping[str, Any],
    *,
    goal: float = FANOUT_SPEEDUP_GOAL,
    title: str | None = None,
) -> Figure:
    """Left: per-query p50 / p95 latency (ms) of each fan-out mode (serial, threads, asyncio).
    Right: speedup over serial (p50 ratio) per mode, with the goal line."""
    modes: Mapping[str, Mapping[str, Any]] = summary.get("modes") or {}
    fig, (ax, ax2) = new_figure(2, 1, width=6.2, height=4.6)
    names = list(modes)
    ncoll = len(summary.get("collections") or [])
    head = title or f"Fan-out over {ncoll or '?'} collections: latency per mode"
    if not names:
        empty_panel(ax, "no fan-out modes measured", title=head)
        empty_panel(ax2, "no fan-out modes measured")
        return fig
    x = np.arange(len(names))
    w = 0.38
    p50 = [_f(modes[m].get("p50_ms")) for m in names]
    p95 = [_f(modes[m].get("p95_ms")) for m in names]
    b1 = ax.bar(x - w / 2, p50, w, label="p50", color="#4c72b0", edgecolor="black", lw=0.5)
    b2 = ax.bar(x + w / 2, p95, w, label="p95", color="#dd8452", edgecolor="black", lw=0.5)
    ax.bar_label(b1, fmt="%.3g", fontsize=8)
    ax.bar_label(b2, fmt="%.3g", fontsize=8)
    ax.set_xticks(x, names)
    finish(ax, title=head, xlabel="fan-out mode", ylabel="per-query latency (ms)")
    sp = [1.0 if m == "serial" else _f(modes[m].get("speedup_p50")) for m in names]
    colors = ["#999999" if m == "serial" else ("#2ca02c" if s >= goal else "#d62728")
              for m, s in zip(names, sp)]
    b3 = ax2.bar(x, sp, 0.55, color=colors, edgecolor="black", lw=0.5,
                 label="speedup over serial (p50 ratio)")
    ax2.bar_label(b3, labels=[f"{s:.2f}x" for s in sp], fontsize=9)
    draw_target(ax2, goal, f"goal {goal:g}x (GIL-releasing backends, 2 cores)")
    ax2.axhline(1.0, color="#555555", lw=1.0)
    ax2.set_xticks(x, names)
    ax2.set_ylim(0, max([goal, *[s for s in sp if math.isfinite(s)]]) * 1.2)
    finish(ax2, title="Speedup over serial", xlabel="fan-out mode",
           ylabel="speedup (serial p50 / mode p50)")
    backends = sorted({str(c.get("backend")) for c in summary.get("collections") or []})
    verdict = summary.get("verdict") or {}
    note(fig, f"backends: {', '.join(backends) or '?'}; {summary.get('n_queries')} queries, "
              f"k={summary.get('k')}; fusion {(summary.get('fusion') or {}).get('method')}. "
              + " | ".join(f"{k}: {v}" for k, v in verdict.items()))
    return fig


# --------------------------------------------------------------------------- rerank depth


def rerank_depth_curve(summary: Mapping[str, Any], *, title: str | None = None,
                       bands: Mapping[str, Mapping[int, tuple[float, float]]] | None = None
                       ) -> Figure:
    """Quality (selection metric, e.g. nDCG@10) per rerank depth on the tuning and held-out
    splits, with the tolerance band under the best tuning value (the target the choice must
    meet) and the chosen depth; right: whole-stage p50 / p95 latency (ms) per depth.
    ``bands``: ``{split: {depth: (low, high)}}``, a confidence interval of each split's mean
    (:func:`retrieval.reporting.bands.per_query_bands`), shaded around its line."""
    curve = list(summary.get("curve") or [])
    metric = str(summary.get("selection_metric") or "ndcg@10")
    fig, (ax, ax2) = new_figure(2, 1, width=6.4, height=4.6)
    head = title or f"Rerank depth: {metric} vs depth"
    if not curve:
        empty_panel(ax, "no rerank curve", title=head)
        empty_panel(ax2, "no rerank curve")
        return fig
    depths = [int(c["depth"]) for c in curve]
    for split, color, marker in (("tuning", "#1f77b4", "o"), ("heldout", "#ff7f0e", "s")):
        ys = [_f((c.get(split) or {}).get(metric)) for c in curve]
        ax.plot(depths, ys, marker=marker, color=color, label=f"{split} split")
        band = (bands or {}).get(split) or {}
        if all(d in band for d in depths):
            ax.fill_between(depths, [band[d][0] for d in depths], [band[d][1] for d in depths],
                            color=color, alpha=0.15, lw=0,
                            label=f"{split}: 95% bootstrap interval over its queries")
    tol = _f(summary.get("tolerance"))
    tune_vals = [_f((c.get("tuning") or {}).get(metric)) for c in curve]
    best = max(v for v in tune_vals if math.isfinite(v))
    if math.isfinite(tol):
        draw_target(ax, best - tol, f"best tuning - tolerance ({best:.4f} - {tol:g})")
    chosen = summary.get("chosen_depth")
    if chosen is not None:
        ax.axvline(int(chosen), color="#2ca02c", lw=1.8, label=f"chosen depth = {chosen}")
    fs = (summary.get("first_stage") or {})
    first = summary.get("sweep_first_stage")
    for name, ls in (("dense", ":"), ("bm25", "-.")):
        v = ((fs.get(name) or {}).get("all") or {}).get(metric)
        if v is not None and name != first:
            ax.axhline(float(v), color="#777777", ls=ls, lw=1.0,
                       label=f"{name} first stage alone (all queries): {float(v):.4f}")
    finish(ax, title=head + f" (first stage: {first})", xlabel="rerank depth N (top-N re-scored)",
           ylabel=f"{metric} (mean over queries, 0..1)", legend_loc="below", legend_cols=2)
    lat50 = [_f((c.get("latency") or {}).get("p50_ms")) for c in curve]
    lat95 = [_f((c.get("latency") or {}).get("p95_ms")) for c in curve]
    ax2.plot(depths, lat50, marker="o", color="#4c72b0", label="p50")
    ax2.plot(depths, lat95, marker="s", color="#dd8452", label="p95")
    if chosen is not None:
        ax2.axvline(int(chosen), color="#2ca02c", lw=1.8, label=f"chosen depth = {chosen}")
    if log_ok(lat95):
        ax2.set_yscale("log")
    finish(ax2, title="Whole-stage latency (first stage + rerank call)",
           xlabel="rerank depth N", ylabel="per-query latency (ms, log scale)",
           legend_loc="upper left")
    rr = summary.get("reranker") or {}
    rname = rr.get("name") if isinstance(rr, Mapping) else rr
    note(fig, f"reranker: {rname}; {summary.get('n_tuning')} tuning / {summary.get('n_heldout')} "
              f"held-out queries of {summary.get('dataset')}; latency on "
              f"{summary.get('latency_sample_queries')} sampled queries. Choice: smallest depth "
              f"within the tolerance of the best tuning value.")
    return fig


# --------------------------------------------------------------------------- semantic cache


def cache_curve(summary: Mapping[str, Any], *, title: str | None = None) -> Figure:
    """Left: hit rate, correct-hit rate and precision against the threshold (cosine distance);
    right: false-hit rate per probe on both splits with the tuning upper confidence bound and
    the cap (target); the chosen threshold on both."""
    rows = list(summary.get("curve") or [])
    fig, (ax, ax2) = new_figure(2, 1, width=6.4, height=4.6)
    head = title or "Semantic cache: hits vs threshold"
    if not rows:
        empty_panel(ax, "no cache curve", title=head)
        empty_panel(ax2, "no cache curve")
        return fig
    unit = str(rows[0].get("threshold_unit") or "cosine_distance").replace("_", " ")
    t_chosen = summary.get("threshold")
    cap = summary.get("max_false_hit")
    style = {"tuning": "-", "heldout": "--"}
    for split in ("tuning", "heldout"):
        sub = sorted((r for r in rows if r.get("split") == split), key=lambda r: r["threshold"])
        if not sub:
            continue
        t = [r["threshold"] for r in sub]
        ls = style[split]
        ax.plot(t, [_f(r.get("hit_rate")) for r in sub], ls=ls, color="#1f77b4",
                label=f"hit rate ({split})")
        ax.plot(t, [_f(r.get("correct_hit_rate")) for r in sub], ls=ls, color="#2ca02c",
                label=f"correct-hit rate ({split})")
        ax.plot(t, [_f(r.get("precision")) for r in sub], ls=ls, color="#9467bd",
                label=f"precision = correct / hits ({split})")
        ax2.plot(t, [_f(r.get("false_hit_rate")) for r in sub], ls=ls, color="#d62728",
                 label=f"false-hit rate ({split})")
        n = _f((summary.get("design") or {}).get(f"n_{split}"))
        if math.isfinite(n) and n > 0:  # 95% Wilson interval of each rate over the split's probes
            for a, key, count, color in ((ax, "hit_rate", "hits", "#1f77b4"),
                                         (ax, "correct_hit_rate", "correct_hits", "#2ca02c"),
                                         (ax2, "false_hit_rate", "false_hits", "#d62728")):
                k = np.array([_f(r[count]) if r.get(count) is not None
                              else round(_f(r.get(key)) * n) for r in sub])
                lo, hi = wilson_interval(k, n)
                a.fill_between(t, lo, hi, color=color, alpha=0.12, lw=0,
                               label="95% Wilson interval (probes)"
                               if (key, split) == ("hit_rate", "tuning") else None)
        if split == "tuning":
            ax2.plot(t, [_f(r.get("false_hit_upper_bound")) for r in sub], ls=":",
                     color="#8c564b", label=f"{summary.get('bound', 'upper')} bound "
                     f"({_f(summary.get('confidence')):.0%}, tuning)")
    for a in (ax, ax2):
        if t_chosen is not None:
            a.axvline(float(t_chosen), color="#2ca02c", lw=1.8,
                      label=f"chosen threshold = {float(t_chosen):.4f}")
    draw_target(ax2, cap, f"false-hit cap = {cap}")
    ax.set_ylim(0, 1.02)
    finish(ax, title=head, xlabel=f"threshold ({unit}; hit iff nearest distance <= threshold)",
           ylabel="rate per probe (0..1)", legend_loc="best")
    if cap is not None:
        ax2.set_ylim(0, max(3 * float(cap), 0.02))
    finish(ax2, title="False hits vs threshold (zoomed)", xlabel=f"threshold ({unit})",
           ylabel="false hits per probe (0..1)", legend_loc="upper left")
    d = summary.get("design") or {}
    note(fig, f"{d.get('n_probes', '?')} probes ({d.get('n_tuning', '?')} tuning / "
              f"{d.get('n_heldout', '?')} held-out), positive fraction "
              f"{_f(d.get('positive_fraction')):.2f}; held-out at the chosen threshold: hit rate "
              f"{_f(summary.get('heldout_hit_rate')):.3f}, false-hit rate "
              f"{_f(summary.get('heldout_false_hit_rate')):.4f}.")
    return fig


__all__ = [
    "EMBED_SPEEDUP_GOAL",
    "FANOUT_SPEEDUP_GOAL",
    "TARGET_COLOR",
    "cache_curve",
    "embed_batch_sweep",
    "fanout_speedups",
    "rerank_depth_curve",
]
