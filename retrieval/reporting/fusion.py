"""Report of a ``fusion-tune`` run (``rwb tune fusion``): its figure and tables, kept together
so the run kind registers in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from retrieval.reporting.html import Table
from retrieval.reporting.style import empty_panel, new_figure

COLORS = {"rrf": "#1f77b4", "convex": "#ff7f0e"}
BASELINES = {"rrf60": "#2ca02c", "dense": "#9467bd", "bm25": "#8c564b"}


def dev_vs_test(summary: Mapping[str, Any]) -> Figure:
    """Every candidate's dev vs test nDCG@10 (by method), the chosen one ringed, the baselines'
    test values as horizontal lines."""
    fig, (ax,) = new_figure(1, 1, width=6.4, height=4.6)
    cands = list(summary.get("candidates") or [])
    metric = summary.get("metric", "ndcg@10")
    if not cands:
        empty_panel(ax, "no fusion candidates", title="Fusion candidates")
        return fig
    for method, color in COLORS.items():
        sub = [c for c in cands if c.get("method") == method]
        if sub:
            ax.scatter([c["dev"] for c in sub], [c["test"] for c in sub], s=12, alpha=0.6,
                       color=color, label=method)
    ch = summary.get("chosen") or {}
    if ch:
        ax.scatter([ch["dev"]], [ch["test"]], s=90, facecolors="none", edgecolors="black",
                   label=f"chosen (p {ch.get('p_value', float('nan')):.3g} vs rrf60)")
    for role, color in BASELINES.items():
        b = (summary.get("baselines") or {}).get(role)
        if b and b.get("test") is not None:
            ax.axhline(b["test"], color=color, ls="--", lw=1, label=f"{role} (test)")
    ax.set_xlabel(f"dev {metric}")
    ax.set_ylabel(f"test {metric}")
    ax.set_title("Fusion candidates: chosen on dev, judged on test")
    ax.legend(fontsize=8, loc="lower right")
    return fig


def fusion_tables(summary: Mapping[str, Any], top: int = 15) -> list[tuple[str, Table]]:
    """The baselines and the chosen fusion, then the best candidates on dev."""
    metric = summary.get("metric", "ndcg@10")
    b = summary.get("baselines") or {}
    ch = summary.get("chosen") or {}
    legs = summary.get("legs") or {}
    rows = [["chosen: " + str(ch.get("label")), ch.get("dev"), ch.get("test"),
             ch.get("p_value"), None]]
    rows += [[role, v.get("dev"), v.get("test"), None, (legs.get(role) or {}).get("p95_ms")]
             for role, v in b.items()]
    ranked = sorted(summary.get("candidates") or [], key=lambda c: -c["dev"])[:top]
    return [
        ("Fusion vs baselines", Table(
            ["setting", f"dev {metric}", f"test {metric}", "p vs rrf60", "leg p95 ms"], rows,
            [True] + [False] * len(b), caption=str(summary.get("verdict") or ""))),
        ("Best candidates on dev", Table(
            ["candidate", f"dev {metric}", f"test {metric}"],
            [[c["label"], c["dev"], c["test"]] for c in ranked],
            [c["label"] == ch.get("label") for c in ranked])),
    ]


__all__ = ["dev_vs_test", "fusion_tables"]
