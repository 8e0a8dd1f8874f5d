"""The report of a live sweep (``rwb report RUN`` of a ``live-sweep`` run): recall and its lower
bound per measured knob value with the target, the probes, the collection and the budget spent,
the query shift. Queries sampled from the collection are labelled "not production traffic" in
every figure title and table caption."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from retrieval.reporting.html import Table
from retrieval.reporting.style import draw_target, empty_panel, finish, new_figure, note

NOT_PRODUCTION = " [NOT PRODUCTION TRAFFIC: queries sampled from the collection]"


def _label(s: Mapping[str, Any]) -> str:
    return NOT_PRODUCTION if (s.get("live") or {}).get("not_production_traffic") else ""


def recall_by_knob(s: Mapping[str, Any]) -> Figure:
    """Recall@k (dots) and its lower bound (crosses) of each probe vs the knob, the target as
    a dashed line, the chosen value marked."""
    fig, axes = new_figure(1, 1, width=7.6, height=3.8)
    ax = axes[0]
    knob = s.get("knob") or {}
    probes = [p for p in s.get("probes") or [] if p.get("kind") == "probe"]
    if not probes:
        empty_panel(ax, "no knob value measured", title="Live collection")
        return fig
    name = str(knob.get("name"))
    pts = sorted((p["search"][name], p["recall"], p["recall_lb"]) for p in probes)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", label="recall (tuning queries)")
    ax.plot([p[0] for p in pts], [p[2] for p in pts], "x", color="black", label="lower bound")
    chosen = s.get("chosen")
    if chosen:
        ax.axvline(chosen["search"][name], color="#2a9d8f", lw=1.0, label="chosen")
    draw_target(ax, s.get("target_recall"), "target")
    if len(pts) > 2 and pts[-1][0] > 20 * max(pts[0][0], 1):
        ax.set_xscale("log")
    finish(ax, title=f"{s.get('engine')} {s.get('collection')}: {knob.get('native')}"
           + _label(s), xlabel=str(knob.get("native")), ylabel=f"recall@{s.get('k')}",
           legend_loc="lower right")
    note(fig, "Measured in place on the live collection (read-only), paced by the budget; "
         "recall against the exact top-k of the collection.")
    return fig


def figures(s: Mapping[str, Any]) -> list[tuple[str, str, Figure, str]]:
    return [("live_recall", "Recall by knob on the live collection", recall_by_knob(s),
             "Target search on the tuning queries; the chosen value is the smallest whose "
             "recall lower bound meets the target." + _label(s))]


def scalar_table(values: Mapping[str, Any], caption: str = "") -> Table:
    """Two columns (key, value)."""
    return Table(["key", "value"], [[k, v] for k, v in values.items()], caption=caption)


def tables(s: Mapping[str, Any]) -> list[tuple[str, Table]]:
    live = s.get("live") or {}
    head = {k: s.get(k) for k in ("run_id", "engine", "collection", "metric", "k",
                                  "target_recall", "heldout_recall", "heldout_meets")}
    head["not_production_traffic"] = live.get("not_production_traffic")
    head["budget_exhausted"] = live.get("budget_exhausted")
    chosen = s.get("chosen") or {}
    head["chosen"] = ", ".join(f"{k}={v}" for k, v in (chosen.get("native") or {}).items()) \
        or None
    desc = live.get("description") or {}
    coll = {k: desc.get(k) for k in ("dim", "metric", "index_kind", "rows", "segments")}
    coll.update({f"build.{k}": v for k, v in (desc.get("build_params") or {}).items()})
    spent = {**(live.get("spent") or {}), **{f"budget.{k}": v
                                               for k, v in (live.get("budget") or {}).items()}}
    snap = live.get("snapshot") or {}
    cols = ["kind", "search", "recall", "recall_lb", "p50_ms", "p95_ms", "p99_ms", "meets"]
    rows = [[p.get(c) if c != "search" else ", ".join(f"{k}={v}" for k, v in
                                                      p["search"].items()) for c in cols]
            for p in s.get("probes") or []]
    out = [("Summary", scalar_table(head, caption="live sweep" + _label(s))),
           ("Collection (as the engine describes it)", scalar_table(coll)),
           ("Budget spent", scalar_table({**spent, **{f"snapshot.{k}": v for k, v in
                                                       snap.items()}})),
           ("Probes", Table(cols, rows, [bool(chosen) and p.get("search") == chosen.get(
               "search") and p.get("kind") == "probe" for p in s.get("probes") or []],
               caption="chosen highlighted; latency per single paced query (ms)"
               + _label(s)))]
    shift = live.get("query_shift")
    if shift:
        keep = {k: v for k, v in shift.items() if not isinstance(v, list | dict)}
        out.append(("Query shift (lab vs production)", scalar_table(keep)))
    return out


__all__ = ["figures", "recall_by_knob", "tables"]
