"""Figure plumbing shared by every plot: headless matplotlib figures, one colour per series, the
target line, PNG bytes.

Figures are built with :class:`matplotlib.figure.Figure` and an Agg canvas, never through
``pyplot``: no global figure registry, nothing to close, safe in threads, and the same object
displays inline in a notebook.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: one colour per series, stable across the plots of one report (tab10, then tab20)
PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
)
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
TARGET_COLOR = "#c00000"
FRONT_COLOR = "#222222"
DPI = 110


def new_figure(
    ncols: int = 1, nrows: int = 1, *, width: float = 7.0, height: float = 4.6
) -> tuple[Figure, list[Axes]]:
    """A figure of ``nrows x ncols`` panels (each ``width x height`` inches) and its axes, flat."""
    fig = Figure(figsize=(width * ncols, height * nrows), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, [ax for row in axes for ax in row]


class Colors:
    """Assigns a stable colour and marker to each series name, in first-seen order."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._index: dict[str, int] = {}
        for n in names:
            self.index(n)

    def index(self, name: str) -> int:
        return self._index.setdefault(name, len(self._index))

    def color(self, name: str) -> str:
        return PALETTE[self.index(name) % len(PALETTE)]

    def marker(self, name: str) -> str:
        return MARKERS[self.index(name) % len(MARKERS)]


def draw_target(ax: Axes, value: float | None, label: str, *, axis: str = "y") -> None:
    """A dashed red line at ``value`` (horizontal for ``axis='y'``, vertical for 'x')."""
    if value is None or not math.isfinite(float(value)):
        return
    if axis == "y":
        ax.axhline(float(value), color=TARGET_COLOR, ls="--", lw=1.3, label=label, zorder=1)
    else:
        ax.axvline(float(value), color=TARGET_COLOR, ls="--", lw=1.3, label=label, zorder=1)


def finish(ax: Axes, *, title: str, xlabel: str, ylabel: str, legend: bool = True,
           legend_loc: Any = "best", legend_cols: int = 1) -> None:
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    if legend:
        handles, _labels = ax.get_legend_handles_labels()
        if handles and legend_loc == "below":  # outside, under the axes: never hides data
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14),
                      ncols=legend_cols, framealpha=0.85)
        elif handles:
            ax.legend(fontsize=8, loc=legend_loc, ncols=legend_cols, framealpha=0.85)


def note(fig: Figure, text: str) -> None:
    """A small footnote under the panels (units, definitions, where the numbers come from)."""
    if text:
        width = int(fig.get_figwidth() * 17)  # characters of 7.5 pt text per line, about
        fig.supxlabel(textwrap.fill(text, width), fontsize=7.5, color="#444444", x=0.01,
                      ha="left")


def empty_panel(ax: Axes, message: str, *, title: str = "") -> None:
    """A panel that says why it has no data (instead of a blank or misleading plot)."""
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=10, wrap=True,
            transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=11)


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def params_text(params: Any, keys: Sequence[str] | None = None) -> str:
    """``{"M": 16, "ef_construction": 100}`` -> ``M=16 ef_construction=100`` (or ``-``)."""
    if not isinstance(params, dict) or not params:
        return "-" if not params else str(params)
    items = [(k, params[k]) for k in (keys or params) if k in params]
    return " ".join(f"{k}={_short(v)}" for k, v in items) or "-"


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def log_ok(values: Iterable[Any]) -> bool:
    """True when every value is a positive finite number (a log axis can show them)."""
    vals = [float(v) for v in values if v is not None]
    return bool(vals) and all(math.isfinite(v) and v > 0 for v in vals)


__all__ = [
    "Colors",
    "draw_target",
    "empty_panel",
    "finish",
    "log_ok",
    "new_figure",
    "note",
    "params_text",
    "png_bytes",
]
