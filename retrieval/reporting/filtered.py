"""Figures and tables of a filtered-search run (an eval or sweep run whose spec has ``filters``):
recall vs selectivity and p95 vs selectivity per index entry and strategy, target line and cliff.

Series values per bucket: an eval run takes, per (entry, strategy), the best recall over every
measured config (recall figure) and the p95 of the cheapest config meeting the target (p95
figure); a sweep run takes the chosen knob of each bucket (its full re-timing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from retrieval.reporting.html import Table
from retrieval.reporting.style import Colors, draw_target, empty_panel, finish, new_figure, note

Series = dict[tuple[str, str], list[tuple[float, float]]]


def series_points(summary: Mapping[str, Any]) -> tuple[Series, Series]:
    """(recall series, p95 series): (label, strategy) -> [(selectivity, value)] sorted."""
    target = summary.get("target_recall")
    recall: dict[tuple[str, str], dict[float, float]] = {}
    p95: dict[tuple[str, str], dict[float, float]] = {}
    if "choices" in summary:  # a sweep: the chosen knob per bucket
        for c in summary["choices"]:
            key, s = (c["label"], c["strategy"]), float(c["selectivity"])
            if c.get("chosen"):
                recall.setdefault(key, {})[s] = float(c["recall"])
                if c.get("p95_ms") is not None:
                    p95.setdefault(key, {})[s] = float(c["p95_ms"])
            elif c.get("best_probe_recall") is not None:  # infeasible: its best probe
                recall.setdefault(key, {})[s] = float(c["best_probe_recall"])
    else:
        for r in summary.get("rows", []):
            key, s = (r["label"], r["strategy"]), float(r["selectivity"])
            cur = recall.setdefault(key, {})
            cur[s] = max(cur.get(s, 0.0), float(r["recall"]))
            ok = target is None or float(r["recall"]) >= float(target) - 1e-9
            if ok and r.get("p95_ms") is not None:
                best = p95.setdefault(key, {})
                best[s] = min(best.get(s, math.inf), float(r["p95_ms"]))

    def ordered(d: dict[tuple[str, str], dict[float, float]]) -> Series:
        return {k: sorted(v.items()) for k, v in d.items()}

    return ordered(recall), ordered(p95)


def _name(key: tuple[str, str]) -> str:
    return f"{key[0]} / {key[1]}"


def _cliffs(summary: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    out = {}
    for label, by in (summary.get("cliff_by_strategy") or {}).items():
        for strategy, v in by.items():
            if v is not None:
                out[(label, strategy)] = float(v)
    return out


def recall_vs_selectivity(summary: Mapping[str, Any], colors: Colors | None = None) -> Figure:
    """Filtered recall@k per bucket vs selectivity (log x), per index entry and strategy; the
    target line; each cliff as a dotted vertical line. ``summary``: a filtered run's."""
    colors = colors or Colors()
    k = summary.get("k", 10)
    target = summary.get("target_recall")
    rec, _ = series_points(summary)
    fig, (ax,) = new_figure(width=8.0, height=5.0)
    if not any(rec.values()):
        empty_panel(ax, "no measured bucket", title=f"Filtered recall@{k} vs selectivity")
        return fig
    cliffs = _cliffs(summary)
    for key, pts in rec.items():
        if not pts:
            continue
        name = _name(key)
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker=colors.marker(name), color=colors.color(name), label=name, lw=1.4)
        if key in cliffs:
            ax.axvline(cliffs[key], color=colors.color(name), ls=":", lw=1.2)
            ax.plot([cliffs[key]], [0.0], marker="v", color=colors.color(name), ms=9,
                    clip_on=False)
    draw_target(ax, target, f"target {target}")
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    finish(ax, title=f"Filtered recall@{k} vs selectivity", xlabel="selectivity (share of base "
           "vectors the filter matches, log)", ylabel=f"recall@{k} (fewer-than-k rule)",
           legend_loc="below", legend_cols=3)
    note(fig, "Dotted vertical line and triangle: the cliff of that index/strategy (highest "
         "selectivity where no knob value in range met the target). "
         + ("Best recall over the measured configs per bucket." if "choices" not in summary
            else "Recall of the chosen knob per bucket (tuning queries); an infeasible bucket "
            "shows its best probe (the top of the knob range)."))
    return fig


def p95_vs_selectivity(summary: Mapping[str, Any], colors: Colors | None = None) -> Figure:
    """p95 (ms, log) of the cheapest setting meeting the target per bucket vs selectivity."""
    colors = colors or Colors()
    target = summary.get("target_recall")
    _, lat = series_points(summary)
    fig, (ax,) = new_figure(width=8.0, height=5.0)
    if not any(lat.values()):
        empty_panel(ax, f"no config met the target {target} in any bucket",
                    title="p95 latency vs selectivity")
        return fig
    for key, pts in lat.items():
        if not pts:
            continue
        name = _name(key)
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker=colors.marker(name), color=colors.color(name), label=name, lw=1.4)
    for key, s in _cliffs(summary).items():
        ax.axvline(s, color=colors.color(_name(key)), ls=":", lw=1.0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    finish(ax, title=f"p95 latency at target recall {target} vs selectivity",
           xlabel="selectivity (log)", ylabel="single-query p95 (ms, log)", legend_loc="below",
           legend_cols=3)
    note(fig, "Per bucket the cheapest setting that meets the target (no point: none did; "
         "dotted lines: cliffs). Each query is timed with its own filter.")
    return fig


def figures(summary: Mapping[str, Any]) -> list[tuple[str, str, Figure, str]]:
    rec, lat = series_points(summary)
    colors = Colors(_name(k) for k in [*rec, *lat])
    return [
        ("recall_vs_selectivity", "Filtered recall vs selectivity",
         recall_vs_selectivity(summary, colors),
         "Recall@k under the fewer-than-k rule, per index entry and filtering strategy; red: "
         "the target; dotted: the cliff."),
        ("p95_vs_selectivity", "p95 latency vs selectivity", p95_vs_selectivity(summary, colors),
         "What filtering costs at the target, per strategy: where the lines cross, the cheapest "
         "strategy changes."),
    ]


def tables(summary: Mapping[str, Any]) -> list[tuple[str, Table]]:
    out = [("Selectivity buckets", Table(
        ["bucket", "target selectivity", "measured selectivity", "min", "max", "filters",
         "filter"],
        [[b["bucket"], b["target_selectivity"], b["selectivity"], b["selectivity_min"],
          b["selectivity_max"], b["distinct_filters"], b["filter"]]
         for b in summary["filters"]["buckets"]],
        caption=summary["filters"].get("fewer_than_k_rule", "")))]
    cliffs = [[label, by_best, *(f"{s}: {v}" for s, v in
                                  summary.get("cliff_by_strategy", {}).get(label, {}).items())]
              for label, by_best in (summary.get("cliff_selectivity") or {}).items()]
    if cliffs:
        width = max(len(r) for r in cliffs)
        out.append(("Cliffs", Table(["index", "cliff (best strategy)"]
                                    + [f"strategy {i}" for i in range(1, width - 1)],
                                    [r + [None] * (width - len(r)) for r in cliffs],
                                    caption=summary.get("cliff_rule", ""))))
    ops: Sequence[Mapping[str, Any]] = summary.get("operating_points") or []
    if ops:
        out.append(("Operating points", Table(
            ["bucket", "selectivity", "index", "strategy", "knob", "p95 ms", "recall",
             "held-out recall", "engine call"],
            [[o["bucket"], o["selectivity"], o.get("label"), o.get("strategy"), o.get("knob"),
              o.get("p95_ms"), o.get("recall"), o.get("heldout_recall"), o.get("engine_call")]
             for o in ops], caption="Per bucket, the cheapest p95 meeting the target.")))
    return out
