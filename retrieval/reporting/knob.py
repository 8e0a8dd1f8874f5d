"""Recall against the search knob: the plot that answers "which ef / nprobe do I need?". One
panel per index entry (knobs differ: ef_search, ef, nprobe), one line per build, the recall's
lower confidence bound as a band, the target line and the chosen value as a star."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from retrieval.reporting.points import knob_curves, series_names
from retrieval.reporting.style import (
    Colors,
    draw_target,
    empty_panel,
    finish,
    new_figure,
    note,
)

Point = Mapping[str, Any]


def recall_vs_knob(
    points: Sequence[Point],
    *,
    k: int = 10,
    target: float | None = None,
    chosen: Sequence[Point] = (),
    knobs: Mapping[str, str] | None = None,
    colors: Colors | None = None,
    title: str | None = None,
) -> Figure:
    """Recall@k (y) against the knob value (x, log when it spans over a decade) for every
    measured point of :func:`~retrieval.reporting.points.knob_curves`; filled markers meet the
    target (by the lower bound where the run has one), hollow ones miss it; the shaded band
    runs from the lower confidence bound to the mean."""
    curves = knob_curves(points, knobs)
    namer = series_names(points)
    labels = list(dict.fromkeys(c["label"] for c in curves))
    colors = colors or Colors()
    head = title or f"Recall@{k} vs search knob"
    ncols = 2 if len(labels) == 4 else min(3, max(1, len(labels)))
    nrows = max(1, math.ceil(len(labels) / ncols))
    fig, axes = new_figure(ncols, nrows, width=4.6, height=3.8)
    if not curves:
        empty_panel(axes[0], "no series with a varying search knob", title=head)
        for ax in axes[1:]:
            ax.set_axis_off()
        return fig
    lows = [target] if target is not None else []
    for c in curves:
        lows += [v for v in (c["recall_lb"] + c["recall"]) if v is not None]
    lo = max(0.0, min(lows) - 0.02)
    for ax, label in zip(axes, labels):
        mine = [c for c in curves if c["label"] == label]
        xs_all: list[float] = []
        for c in mine:
            name, xs, ys, lbs = c["series"], c["x"], c["recall"], c["recall_lb"]
            xs_all += xs
            color = colors.color(name)
            ax.plot(xs, ys, color=color, lw=1.4, zorder=3,
                    label=name if len(mine) > 1 else "recall (mean)")
            ok = [bool(m) if m is not None else (target is None or y >= target)
                  for m, y in zip(c["meets"], ys)]
            ax.scatter([x for x, o in zip(xs, ok) if o], [y for y, o in zip(ys, ok) if o],
                       marker=colors.marker(name), s=30, color=color, zorder=4)
            ax.scatter([x for x, o in zip(xs, ok) if not o],
                       [y for y, o in zip(ys, ok) if not o], marker=colors.marker(name), s=30,
                       facecolors="white", edgecolors=color, zorder=4)
            band = [(x, lb, y) for x, lb, y in zip(xs, lbs, ys) if lb is not None]
            if band:
                ax.fill_between([b[0] for b in band], [b[1] for b in band],
                                [b[2] for b in band], color=color, alpha=0.2, lw=0, zorder=2,
                                label="lower confidence bound .. mean")
                ax.plot([b[0] for b in band], [b[1] for b in band], color=color, lw=0.8,
                        ls=":", zorder=2)
        for ch in chosen:
            if str(ch.get("label") or ch.get("backend")) != label:
                continue
            x = (ch.get("search") or {}).get(mine[0]["knob"])
            if isinstance(x, int | float) and ch.get("recall") is not None:
                ax.scatter([float(x)], [float(ch["recall"])], marker="*", s=240,
                           color="white", edgecolor="black", linewidth=0.9, zorder=6,
                           label=f"chosen {mine[0]['knob']}={x}" + (
                               f" ({namer(ch)})" if len(mine) > 1 else ""))
        draw_target(ax, target, f"target = {target}")
        if xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) > 10:
            ax.set_xscale("log", base=2)  # knob values are counts: 16, 32, 64 ... as plain text
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(lo, 1.005)
        finish(ax, title=label, xlabel=f"{mine[0]['knob']} (search knob)",
               ylabel=f"recall@{k}", legend_loc="lower right")
    for ax in axes[len(labels):]:
        ax.set_axis_off()
    fig.suptitle(head, fontsize=12)
    note(fig, "Every measured point. Filled: meets the target (lower bound >= target where "
              "the run has a bound); hollow: misses. Band: from the lower confidence bound on "
              "recall up to the mean.")
    return fig


__all__ = ["recall_vs_knob"]
