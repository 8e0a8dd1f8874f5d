"""Index trade-off plots (ann-benchmarks conventions): recall@k against single-query p95 latency
(log x) and against batch QPS (log y), per backend/build, with the Pareto front, the chosen
points and the target; the per-query recall distribution at one point; parameter surfaces
(nlist x nprobe, M x ef_construction) with build time and memory beside them.

Every function takes plain points (see :mod:`retrieval.reporting.points`) and returns a
:class:`matplotlib.figure.Figure`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from retrieval.reporting.points import config_key, points_frame, series_names, timed
from retrieval.reporting.style import (
    DPI,
    FRONT_COLOR,
    Colors,
    draw_target,
    empty_panel,
    finish,
    log_ok,
    new_figure,
    note,
    params_text,
)
from retrieval.tune.pareto import front

Point = Mapping[str, Any]


def _recall_limits(ax: Axes, recalls: Sequence[float], target: float | None) -> None:
    vals = [float(r) for r in recalls] + ([float(target)] if target is not None else [])
    lo = min(vals) if vals else 0.0
    ax.set_ylim(max(0.0, lo - 0.03), 1.005)


Namer = Callable[[Point], str]


def _series(points: Sequence[Point], order_key: str, name: Namer) -> dict[str, list[Point]]:
    out: dict[str, list[Point]] = {}
    for p in points:
        out.setdefault(name(p), []).append(p)
    for ser in out.values():
        ser.sort(key=lambda p: float(p[order_key]))
    return out


def _front_points(points: Sequence[Point], cost: str, higher: bool) -> list[Point]:
    idx = front(points, cost, higher)
    return [points[i] for i in idx]


def _chosen_text(chosen: Sequence[Point]) -> str:
    """'chosen: hnswlib ef_search=20 (recall 0.954, p95 0.041 ms); ...' for the footnote (labels
    on the plot collide where the fronts crowd together)."""
    parts = []
    for c in chosen:
        search = params_text(c.get("search")) if c.get("search") else "exact"
        p95 = c.get("p95_ms")
        parts.append(f"{c.get('label') or c.get('backend')} {search} (recall "
                     f"{float(c['recall']):.3f}" + (f", p95 {float(p95):.3g} ms" if p95 else "")
                     + (f", {float(c['qps']):,.0f} QPS" if c.get("qps") else "") + ")")
    return ("Chosen: " + "; ".join(parts) + ".") if parts else ""


def _mark_chosen(ax: Axes, chosen: Sequence[Point], x: str, y: str, colors: Colors,
                 namer: Namer) -> None:
    for i, c in enumerate(chosen):
        if c.get(x) is None or c.get(y) is None:
            continue
        name = namer(c)
        if i == 0:  # one neutral legend entry for every star
            ax.scatter([], [], marker="*", s=200, color="white", edgecolor="black",
                       label="chosen (cheapest meeting target)")
        ax.scatter([float(c[x])], [float(c[y])], marker="*", s=260, color=colors.color(name),
                   edgecolor="black", linewidth=0.8, zorder=6)


def _latency_figure(with_steps: bool) -> tuple[Figure, Axes, Axes | None]:
    """The p95 figure: one panel, plus a narrow one sharing the recall axis for the points
    that have no single-query timing (a sweep's search steps)."""
    if not with_steps:
        fig, (ax,) = new_figure(width=8.0, height=5.2)
        return fig, ax, None
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(10.6, 5.2), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax, side = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [4.0, 1.5]})
    return fig, ax, side


def _draw_steps(side: Axes, steps: Sequence[Point], namer: Namer, colors: Colors,
                target: float | None, k: int) -> None:
    """Points measured without single-query timing, by series: recall only (hollow)."""
    names = list(dict.fromkeys(namer(p) for p in steps))
    for i, name in enumerate(names):
        ys = [float(p["recall"]) for p in steps if namer(p) == name]
        side.scatter([i] * len(ys), ys, marker=colors.marker(name), s=30, facecolors="none",
                     edgecolors=colors.color(name), linewidths=1.2, zorder=3)
    draw_target(side, target, f"target recall@{k} = {target}")
    side.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7.5)
    side.set_xlim(-0.6, len(names) - 0.4)
    finish(side, title=f"search steps ({len(steps)}): recall only", xlabel="series",
           ylabel="", legend=False)


def recall_vs_latency(
    points: Sequence[Point],
    *,
    k: int = 10,
    target: float | None = None,
    chosen: Sequence[Point] = (),
    title: str | None = None,
    colors: Colors | None = None,
) -> Figure:
    """Recall@k (y, linear) against single-query p95 latency (x, ms, log) for every timed point;
    one line per backend/build ordered by recall, the recall/p95 Pareto front as a black step
    line, chosen points as stars and the target as a dashed red line. Points without a p95
    (a sweep's search steps: one batch pass, no single-query timing) are drawn in a narrow
    panel beside it, by recall only."""
    pts = timed(points, "p95_ms")
    steps = [dict(p) for p in points if p.get("p95_ms") is None and p.get("recall") is not None]
    fig, ax, side = _latency_figure(bool(steps))
    colors = colors or Colors()
    head = title or f"Recall@{k} vs p95 latency"
    namer = series_names([*points, *chosen])
    if side is not None:
        _draw_steps(side, steps, namer, colors, target, k)
    if not pts:
        empty_panel(ax, "no timed points (single-query mode was not measured)", title=head)
        return fig
    for name, ser in _series(pts, "recall", namer).items():
        xs = [float(p["p95_ms"]) for p in ser]
        ys = [float(p["recall"]) for p in ser]
        ax.plot(xs, ys, marker=colors.marker(name), ms=5, lw=1.4, color=colors.color(name),
                label=name, zorder=3)
    drawn = {namer(p) for p in pts}
    for name in dict.fromkeys(namer(p) for p in steps):  # every series in the legend
        if name not in drawn:
            ax.scatter([], [], marker=colors.marker(name), s=30, facecolors="none",
                       edgecolors=colors.color(name), label=f"{name} (search steps only)")
    fr = sorted(_front_points(pts, "p95_ms", False), key=lambda p: float(p["p95_ms"]))
    if fr:
        ax.step([float(p["p95_ms"]) for p in fr], [float(p["recall"]) for p in fr],
                where="post", color=FRONT_COLOR, lw=2.2, alpha=0.55, zorder=2,
                label=f"Pareto front ({len(fr)} points)")
    _mark_chosen(ax, chosen, "p95_ms", "recall", colors, namer)
    draw_target(ax, target, f"target recall@{k} = {target}")
    if log_ok(p["p95_ms"] for p in pts):
        ax.set_xscale("log")
    _recall_limits(ax, [p["recall"] for p in [*pts, *steps]], target)
    finish(ax, title=head, xlabel="single-query p95 latency (ms, log scale) - lower is better",
           ylabel=f"recall@{k} (by id, mean over queries)", legend_loc="lower right")
    note(fig, "Up and to the left is better. Latency: one query per call, after warm-up. "
              + _chosen_text(chosen))
    return fig


def recall_vs_qps(
    points: Sequence[Point],
    *,
    k: int = 10,
    target: float | None = None,
    chosen: Sequence[Point] = (),
    title: str | None = None,
    colors: Colors | None = None,
) -> Figure:
    """Batch QPS (y, log) against recall@k (x), the ann-benchmarks plot: one line per
    backend/build, the recall/QPS Pareto front, chosen points and the target (vertical)."""
    pts = timed(points, "qps")
    fig, (ax,) = new_figure(width=8.0, height=5.2)
    colors = colors or Colors()
    head = title or f"Queries per second vs recall@{k}"
    if not pts:
        empty_panel(ax, "no points with QPS", title=head)
        return fig
    namer = series_names([*points, *chosen])
    for name, ser in _series(pts, "recall", namer).items():
        ax.plot([float(p["recall"]) for p in ser], [float(p["qps"]) for p in ser],
                marker=colors.marker(name), ms=5, lw=1.4, color=colors.color(name), label=name,
                zorder=3)
    fr = sorted(_front_points(pts, "qps", True), key=lambda p: float(p["recall"]))
    if fr:
        ax.step([float(p["recall"]) for p in fr], [float(p["qps"]) for p in fr], where="pre",
                color=FRONT_COLOR, lw=2.2, alpha=0.55, zorder=2,
                label=f"Pareto front ({len(fr)} points)")
    _mark_chosen(ax, chosen, "recall", "qps", colors, namer)
    draw_target(ax, target, f"target recall@{k} = {target}", axis="x")
    if log_ok(p["qps"] for p in pts):
        ax.set_yscale("log")
    lo = min([float(p["recall"]) for p in pts] + ([float(target)] if target else []))
    ax.set_xlim(max(0.0, lo - 0.03), 1.005)
    finish(ax, title=head, xlabel=f"recall@{k} (by id, mean over queries)",
           ylabel="queries per second (batch mode, log scale) - higher is better",
           legend_loc="lower left")
    note(fig, "Up and to the right is better. QPS: all queries in one call, best of repeats. "
              + _chosen_text(chosen))
    return fig


def per_query_recall(
    values: Sequence[float] | np.ndarray,
    *,
    k: int = 10,
    target: float | None = None,
    title: str | None = None,
    config: str | Mapping[str, Any] = "",
) -> Figure:
    """Distribution of per-query recall@k at one config: share of queries at each recall value
    (a bar per possible value i/k), with the mean, the 5th percentile and the target.
    ``config``: text, or the point itself (named by :func:`config_label`)."""
    if not isinstance(config, str):
        from retrieval.reporting.points import config_label

        config = config_label(config)
    x = np.asarray(values, dtype=np.float64)
    fig, (ax,) = new_figure(width=7.5, height=4.6)
    head = title or f"Per-query recall@{k}" + (f" at {config}" if config else "")
    if x.size == 0:
        empty_panel(ax, "no per-query recall stored for this run", title=head)
        return fig
    levels = np.round(np.arange(k + 1) / k, 6)
    counts = np.array([np.sum(np.isclose(x, v)) for v in levels], dtype=np.float64)
    other = x.size - counts.sum()  # tie-aware or fractional values: fall back to a histogram
    if other > 0:
        counts, edges = np.histogram(x, bins=k + 1, range=(0.0, 1.0))
        levels = (edges[:-1] + edges[1:]) / 2
    share = counts / x.size
    bars = ax.bar(levels, share, width=0.8 / (len(levels) - 1 or 1), color="#4c72b0",
                  edgecolor="black", lw=0.5, label=f"queries ({x.size})")
    ax.bar_label(bars, labels=[str(int(c)) if c else "" for c in counts], fontsize=8)
    mean, p5 = float(x.mean()), float(np.percentile(x, 5))
    ax.axvline(mean, color="#2ca02c", lw=1.6, label=f"mean = {mean:.4f}")
    ax.axvline(p5, color="#ff7f0e", lw=1.6, ls=":", label=f"5th percentile = {p5:.2f}")
    draw_target(ax, target, f"target (mean) = {target}", axis="x")
    below = float(np.mean(x < target)) if target is not None else None
    ax.set_xlim(-0.06, 1.06)
    ax.set_ylim(0, max(share.max() * 1.15, 0.05))
    finish(ax, title=head, xlabel=f"recall@{k} of one query (0..1)",
           ylabel="share of queries", legend_loc="upper left")
    if below is not None:
        note(fig, f"{below:.1%} of the queries are below the target although the mean may meet it.")
    return fig


# --------------------------------------------------------------------------- surfaces


def _heatmap(ax: Axes, grid: np.ndarray, rows: Sequence[Any], cols: Sequence[Any], *,
             title: str, xlabel: str, ylabel: str, fmt: str, cmap: str,
             cbar_label: str, fig: Figure, log: bool = False) -> None:
    from matplotlib.colors import LogNorm

    data = np.ma.masked_invalid(grid.astype(np.float64))
    norm = None
    if log and data.count() and float(data.min()) > 0:
        norm = LogNorm(vmin=float(data.min()), vmax=float(data.max()))
    im = ax.imshow(data, aspect="auto", origin="lower", cmap=cmap, norm=norm)
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            v = grid[i, j]
            if not math.isfinite(v):
                ax.text(j, i, "-", ha="center", va="center", fontsize=8, color="#777777")
                continue
            r, g, b, _ = im.cmap(im.norm(v))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # text colour by cell luminance
            ax.text(j, i, format(v, fmt), ha="center", va="center", fontsize=8.5,
                    color="white" if dark else "black")
    cb = fig.colorbar(im, ax=ax, shrink=0.85)
    cb.set_label(cbar_label, fontsize=8)
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def _grid(frame: Any, rows_col: str, cols_col: str, value: str,
          agg: str = "mean") -> tuple[np.ndarray, list[Any], list[Any]]:
    sub = frame.dropna(subset=[rows_col, cols_col])
    piv = sub.pivot_table(index=rows_col, columns=cols_col, values=value, aggfunc=agg,
                          dropna=False)
    # every measured row/column, also where no cell has a value (e.g. none meets the target)
    piv = piv.reindex(index=sorted(sub[rows_col].unique()),
                      columns=sorted(sub[cols_col].unique()))
    rows = [_nice(v) for v in piv.index]
    cols = [_nice(v) for v in piv.columns]
    return piv.to_numpy(dtype=np.float64), rows, cols


def _nice(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _param(col: str) -> str:
    return col.split(".", 1)[-1]


def param_surface(
    points: Sequence[Point],
    rows: str,
    cols: str,
    *,
    k: int = 10,
    target: float | None = None,
    title: str | None = None,
) -> Figure:
    """Surfaces of two parameters (dotted names, e.g. ``build.nlist`` x ``search.nprobe`` or
    ``build.M`` x ``build.ef_construction``), four panels:

    - recall@k per cell (for two build params: the most accurate search setting measured);
    - single-query p95 latency (ms) per cell (two build params: the cheapest p95 whose recall
      meets the target, else the p95 at the most accurate setting);
    - build time (s) and index memory (MiB) per build config (bars for one build param, heatmaps
      for two). Cells never measured show ``-``.
    """
    frame = points_frame(list(points))
    head = title or f"{_param(rows)} x {_param(cols)}"
    fig, axes = new_figure(2, 2, width=6.6, height=4.4)
    missing = [c for c in (rows, cols) if c not in frame.columns]
    if frame.empty or missing:
        for ax in axes:
            empty_panel(ax, f"run has no values of {', '.join(missing) or 'any param'}")
        fig.suptitle(head)
        return fig
    both_build = rows.startswith("build.") and cols.startswith("build.")
    frame = frame.copy()
    if "memory_bytes" in frame:
        frame["memory_mib"] = frame["memory_bytes"].astype(float) / 2**20
    xl, yl = _param(cols), _param(rows)
    if both_build:
        cell = _per_build_cells(frame, rows, cols, target)
        g, r, c = _grid(cell, rows, cols, "recall")
        _heatmap(axes[0], g, r, c, title=f"recall@{k} at the most accurate search measured",
                 xlabel=xl, ylabel=yl, fmt=".3f", cmap="viridis", cbar_label=f"recall@{k}",
                 fig=fig)
        if target is not None:
            _outline_meeting(axes[0], g, target)
        g, r, c = _grid(cell, rows, cols, "p95_ms")
        what = (f"cheapest p95 with recall@{k} >= {target} (ms; - = none)"
                if target is not None else "p95 latency at the most accurate search (ms)")
        _heatmap(axes[1], g, r, c, title=what, xlabel=xl, ylabel=yl, fmt=".3g",
                 cmap="magma_r", cbar_label="single-query p95 (ms)", fig=fig, log=True)
        g, r, c = _grid(frame, rows, cols, "build_s", "max")
        _heatmap(axes[2], g, r, c, title="build time (s)", xlabel=xl, ylabel=yl, fmt=".3g",
                 cmap="Blues", cbar_label="build time (s)", fig=fig)
        if "memory_mib" in frame:
            g, r, c = _grid(frame, rows, cols, "memory_mib", "max")
            _heatmap(axes[3], g, r, c, title="index memory (MiB)", xlabel=xl, ylabel=yl,
                     fmt=".3g", cmap="Greens", cbar_label="memory (MiB)", fig=fig)
        else:
            empty_panel(axes[3], "no memory measured", title="index memory (MiB)")
    else:
        build_col = rows if rows.startswith("build.") else cols
        g, r, c = _grid(frame, rows, cols, "recall")
        _heatmap(axes[0], g, r, c, title=f"recall@{k}", xlabel=xl, ylabel=yl, fmt=".3f",
                 cmap="viridis", cbar_label=f"recall@{k}", fig=fig)
        if target is not None:
            _outline_meeting(axes[0], g, target)
        if "p95_ms" in frame and frame["p95_ms"].notna().any():
            g, r, c = _grid(frame, rows, cols, "p95_ms")
            _heatmap(axes[1], g, r, c, title="single-query p95 latency (ms)", xlabel=xl,
                     ylabel=yl, fmt=".3g", cmap="magma_r", cbar_label="p95 (ms)", fig=fig,
                     log=True)
            if target is not None:
                _outline_meeting(axes[1], _grid(frame, rows, cols, "recall")[0], target)
        else:
            empty_panel(axes[1], "no single-query latency measured", title="p95 latency (ms)")
        _build_bars(axes[2], frame, build_col, "build_s", "build time (s)")
        if "memory_mib" in frame:
            _build_bars(axes[3], frame, build_col, "memory_mib", "index memory (MiB)")
        else:
            empty_panel(axes[3], "no memory measured", title="index memory (MiB)")
    fig.suptitle(head + (f"  (target recall@{k} = {target}: cells meeting it outlined in red)"
                         if target is not None else ""), fontsize=12)
    return fig


def _outline_meeting(ax: Axes, recall_grid: np.ndarray, target: float) -> None:
    from matplotlib.patches import Rectangle

    for i in range(recall_grid.shape[0]):
        for j in range(recall_grid.shape[1]):
            v = recall_grid[i, j]
            if math.isfinite(v) and v >= target:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.8,
                                       edgecolor="#c00000"))


def _per_build_cells(frame: Any, rows: str, cols: str, target: float | None) -> Any:
    """One row per build config: best recall measured and the p95 to report (see above)."""
    import pandas as pd

    out = []
    for _, g in frame.groupby([rows, cols], dropna=True):
        best = g.loc[g["recall"].idxmax()]
        p95 = best.get("p95_ms")
        if target is not None and "p95_ms" in g:
            ok = g[(g["recall"] >= target) & g["p95_ms"].notna()]
            p95 = ok["p95_ms"].min() if len(ok) else float("nan")
        out.append({rows: best[rows], cols: best[cols], "recall": best["recall"],
                    "p95_ms": p95})
    return pd.DataFrame(out)


def _build_bars(ax: Axes, frame: Any, build_col: str, value: str, title: str) -> None:
    if value not in frame or frame[value].isna().all():
        empty_panel(ax, f"no {title} measured", title=title)
        return
    g = frame.groupby(build_col)[value].max()
    labels = [str(_nice(v)) for v in g.index]
    bars = ax.bar(labels, g.to_numpy(dtype=float), color="#6a9fcb", edgecolor="black", lw=0.5,
                  label=title)
    ax.bar_label(bars, fmt="%.3g", fontsize=8)
    finish(ax, title=f"{title} per build", xlabel=_param(build_col), ylabel=title,
           legend=False)


def build_costs(points: Sequence[Point], *, title: str | None = None) -> Figure:
    """Build time (s) and index memory (MiB) of every build config (one bar each)."""
    seen: dict[str, Point] = {}
    for p in points:
        seen.setdefault(config_key({**p, "search": {}}), p)
    builds = list(seen.values())
    fig, axes = new_figure(1, 2, width=9.0, height=max(2.4, 0.42 * len(builds) + 1.4))
    namer = series_names(builds)
    labels = [namer(p) for p in builds]
    colors = Colors(labels)
    for ax, key, scale, name in ((axes[0], "build_s", 1.0, "build time (s)"),
                                 (axes[1], "memory_bytes", 2**20, "index memory (MiB)")):
        vals = [float(p[key]) / scale if p.get(key) is not None else float("nan")
                for p in builds]
        y = np.arange(len(builds))
        ax.barh(y, vals, color=[colors.color(n) for n in labels], edgecolor="black", lw=0.5)
        ax.set_yticks(y, labels, fontsize=8)
        ax.invert_yaxis()
        for yi, v in zip(y, vals):
            if math.isfinite(v):
                ax.text(v, float(yi), f" {v:.3g}", va="center", fontsize=8)
        finite = [v for v in vals if math.isfinite(v)]
        ax.set_xlim(0, (max(finite) if finite else 1.0) * 1.15)
        finish(ax, title=name, xlabel=name, ylabel="backend / build", legend=False)
    fig.suptitle(title or "Build cost per index", fontsize=12)
    return fig


__all__ = [
    "build_costs",
    "param_surface",
    "per_query_recall",
    "recall_vs_latency",
    "recall_vs_qps",
]


def recall_vs_bytes(
    points: Sequence[Point],
    *,
    k: int = 10,
    target: float | None = None,
    chosen: Sequence[Point] = (),
    colors: Colors | None = None,
) -> Figure:
    """Recall@k (y) against the measured resident bytes per vector (x, log) of every point
    whose build was measured (:mod:`retrieval.memory`): one column of points per build (its
    search settings), a dotted line at float32 (4 * dim bytes), the target and the chosen
    points; the memory doctor's flags in the footnote."""
    pts = [p for p in points if p.get("bytes_per_vector") is not None
           and p.get("recall") is not None]
    fig, (ax,) = new_figure(width=8.0, height=5.2)
    colors = colors or Colors()
    head = f"Recall@{k} vs measured bytes per vector"
    if not pts:
        empty_panel(ax, "no measured memory (tune.memory: resident)", title=head)
        return fig
    namer = series_names([*points, *chosen])
    for name, ser in _series(pts, "recall", namer).items():
        xs = [float(p["bytes_per_vector"]) for p in ser]
        ys = [float(p["recall"]) for p in ser]
        ax.scatter(xs, ys, marker=colors.marker(name), s=36, color=colors.color(name),
                   label=name, zorder=3)
    dims = {int(p["memory"]["dim"]) for p in pts if isinstance(p.get("memory"), Mapping)
            and p["memory"].get("dim")}
    for dim in sorted(dims):
        ax.axvline(4.0 * dim, ls=":", color="grey", lw=1.2, label=f"float32 ({4 * dim} B)")
    _mark_chosen(ax, chosen, "bytes_per_vector", "recall", colors, namer)
    draw_target(ax, target, f"target recall@{k} = {target}")
    if log_ok(p["bytes_per_vector"] for p in pts):
        ax.set_xscale("log")
    _recall_limits(ax, [p["recall"] for p in pts], target)
    finish(ax, title=head, xlabel="resident bytes per vector (measured, log scale) - lower is "
           "better", ylabel=f"recall@{k} (by id, mean over queries)", legend_loc="lower right")
    flags = sorted({f"{namer(p)}: {f}" for p in pts if isinstance(p.get("memory"), Mapping)
                    for f in p["memory"].get("flags") or []})
    note(fig, "Up and to the left is better. " + _chosen_text(chosen)
         + (" Memory doctor: " + "; ".join(flags) if flags else ""))
    return fig
