"""Figures of ``rwb profile`` (matplotlib, headless): a stacked per-stage bar of P50/P95/P99, the
remedy waterfall (P95 after each measured step, quality beside) and one slow trace as a
timeline. ``*_figure`` return a :class:`matplotlib.figure.Figure` made without pyplot (so a
notebook's backend is left alone and nothing is shown twice); the others write the PNG and
return its path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _figure(width: float, height: float) -> tuple[Any, Any]:
    """A one-panel figure on the Agg canvas, without pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def _save(fig: Any, out: Path) -> Path:
    fig.savefig(out, dpi=110)
    return out


def stage_bars(stages: Sequence[Mapping[str, Any]], out: Path) -> Path:
    """:func:`stages_figure` written to ``out``."""
    return _save(stages_figure(stages), out)


def stages_figure(stages: Sequence[Mapping[str, Any]]) -> Any:
    """Stacked bars of the top-level stages' P50/P95/P99 (ms; a stage's own percentile, so the
    stack is an upper bound of the end-to-end percentile, marked beside)."""
    top = [s for s in stages if "/" not in s["name"] and s["name"] not in ("request",)]
    e2e = next((s for s in stages if s["name"] == "request"), None)
    fig, ax = _figure(6, 4)
    qs = ("p50_ms", "p95_ms", "p99_ms")
    bottom = [0.0] * len(qs)
    for s in top:
        vals = [float(s.get(q) or 0.0) for q in qs]
        ax.bar([q[:3].upper() for q in qs], vals, bottom=bottom, label=s["name"])
        bottom = [b + v for b, v in zip(bottom, vals)]
    if e2e is not None:
        ax.plot([q[:3].upper() for q in qs], [float(e2e.get(q) or 0) for q in qs], "k_",
                markersize=30, label="end to end")
    ax.set_ylabel("ms")
    ax.set_title("per-stage latency")
    ax.legend(fontsize=7, markerscale=0.4)
    fig.tight_layout()
    return fig


def waterfall_plot(remedies: Mapping[str, Any], out: Path) -> Path:
    """:func:`waterfall_figure` written to ``out``."""
    return _save(waterfall_figure(remedies), out)


def waterfall_figure(remedies: Mapping[str, Any]) -> Any:
    """P50/P95/P99 after each applied remedy step, quality on a second axis."""
    steps = [s for s in remedies.get("steps", []) if s.get("applied")]
    fig, ax = _figure(7, 4)
    x = list(range(len(steps)))
    # distinct markers and line styles: with few requests P95 and P99 often coincide
    for q, mk, ls in (("p50_ms", "o", "-"), ("p95_ms", "s", "--"), ("p99_ms", "^", ":")):
        ax.plot(x, [s.get(q) or 0.0 for s in steps], marker=mk, linestyle=ls, markersize=7,
                label=q[:3].upper())
    ax.set_xticks(x, [s["step"] for s in steps], rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("ms")
    qk = remedies.get("quality_key")
    if qk:
        ax2 = ax.twinx()
        qv = [float(s.get(qk) or 0.0) for s in steps]
        ax2.plot(x, qv, color="k", linestyle="-.", marker="x", label=qk)
        ax2.set_ylim(0.0, max(qv) * 1.1 if max(qv) > 0 else 1.0)  # quality is >= 0
        ax2.set_ylabel(qk)
    ax.legend(fontsize=7)
    ax.set_title("remedies, cumulative (each measured)")
    fig.tight_layout()
    return fig


def trace_timeline(spans: Sequence[Mapping[str, Any]], out: Path, title: str) -> Path:
    """:func:`timeline_figure` written to ``out``."""
    return _save(timeline_figure(spans, title), out)


def timeline_figure(spans: Sequence[Mapping[str, Any]], title: str) -> Any:
    """One request's spans (``stage``, ``start_ms``, ``ms``) as horizontal bars."""
    fig, ax = _figure(7, 0.4 * len(spans) + 1.2)
    for i, s in enumerate(spans):
        ax.barh(i, s["ms"], left=s["start_ms"], color="tab:gray" if s["stage"] == "request"
                else "tab:blue")
        ax.text(s["start_ms"] + s["ms"], i, f" {s['ms']:.3g} ms", va="center", fontsize=6)
    ax.set_yticks(range(len(spans)), [s["stage"] for s in spans], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the request's start")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return fig


def slow_trace_spans(summary: Mapping[str, Any], frame: Any) -> tuple[list[dict[str, Any]], str]:
    """The spans (rows of spans.parquet, baseline pass) of the slowest request of the tail, and
    a title naming it; ([], "") when the summary names none."""
    ex = (summary.get("tail") or {}).get("requests") or []
    if not ex or frame is None:
        return [], ""
    slow = frame[(frame["pass"] == "baseline") & (frame["query_id"] == ex[0]["query_id"])]
    if "request" in slow.columns and "request" in ex[0]:
        slow = slow[slow["request"] == ex[0]["request"]]
    title = f"slowest request: query {ex[0]['query_id']}, {ex[0]['ms']:.1f} ms" + (
        f", trace {ex[0]['trace_id']}" if ex[0].get("trace_id") else "")
    return slow.to_dict("records"), title


__all__ = ["slow_trace_spans", "stage_bars", "stages_figure", "timeline_figure", "trace_timeline",
           "waterfall_figure", "waterfall_plot"]
