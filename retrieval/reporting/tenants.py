"""The report of a tenants study (``sweep`` with ``workload: tenants``): the per-tenant recall
distribution of each layout's chosen config, the flat / index crossover and the answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from retrieval.reporting.html import Table
from retrieval.reporting.style import Colors, draw_target, finish, new_figure, note, params_text


def _name(p: Mapping[str, Any]) -> str:
    return f"{p['layout']} ({p['label']})"


def recall_distribution(summary: Mapping[str, Any], per_tenant: Any) -> Figure:
    """Left: the empirical CDF of per-tenant mean recall per layout (``per_tenant``: the run's
    tenants.parquet). Right: per-tenant recall against tenant size (log x)."""
    fig, (ax_c, ax_s) = new_figure(2, width=6.4, height=4.6)
    layouts = summary.get("layouts") or []
    colors = Colors(_name(p) for p in layouts)
    for p in layouts:
        name = _name(p)
        rows = per_tenant[(per_tenant["layout"] == p["layout"])
                          & (per_tenant["label"] == p["label"])].dropna(subset=["recall"])
        if rows.empty:
            continue
        r = np.sort(rows["recall"].to_numpy(dtype=float))
        ax_c.step(r, np.arange(1, r.size + 1) / r.size, where="post",
                  color=colors.color(name), label=name)
        ax_s.plot(rows["size"], rows["recall"], ls="", marker=colors.marker(name), ms=3,
                  alpha=0.6, color=colors.color(name), label=name)
    ax_s.set_xscale("log")
    draw_target(ax_c, summary.get("target_recall"), "target", axis="x")
    draw_target(ax_s, summary.get("target_recall"), "target")
    k = summary.get("k")
    finish(ax_c, title="per-tenant recall (CDF over tenants)", xlabel=f"tenant recall@{k}",
           ylabel="share of tenants", legend_loc="below")
    finish(ax_s, title="per-tenant recall vs tenant size", xlabel="tenant size (base rows)",
           ylabel=f"tenant recall@{k}", legend_loc="below")
    cross = (summary.get("crossover") or {}).get("size")
    note(fig, "each layout at its chosen config (the first meeting the target for "
              f"{summary.get('tenants', {}).get('meeting')} of tenants, else the most accurate); "
              f"flat/index crossover: {cross if cross is not None else 'none (flat wins)'}")
    return fig


def table(summary: Mapping[str, Any]) -> Table:
    rows = [[p["layout"], p["label"], params_text(p["build"]), params_text(p["search"]),
             p.get("tenant_recall_mean"), p.get("tenant_recall_p5"),
             p.get("tenant_recall_worst1pct"), p.get("tenants_meeting"),
             (p.get("heldout") or {}).get("tenants_meeting"), p.get("meets"),
             p.get("p95_ms"), p.get("p99_ms"), p.get("bytes_per_vector"), p.get("crossover")]
            for p in summary.get("layouts") or []]
    return Table(["layout", "index", "build", "knob", "recall (mean of tenants)", "P5",
                  "worst 1%", "tenants meeting", "held-out meeting", "meets", "p95 ms", "p99 ms",
                  "bytes/vector", "crossover"], rows,
                 caption=(summary.get("tenants") or {}).get("judged_rule", ""))


def crossover_table(summary: Mapping[str, Any]) -> Table:
    c = summary.get("crossover") or {}
    rows = [[f"{r['sizes'][0]}-{r['sizes'][1]}", r["tenants"], r["index_p95_ms"],
             r["flat_p95_ms"], r["index_meets"], r["index_wins"]]
            for r in c.get("classes") or []]
    return Table(["tenant size", "tenants", "index p95 ms", "flat p95 ms", "index meets",
                  "index wins"], rows, caption=str(c.get("rule", "")))


def tables(summary: Mapping[str, Any]) -> list[tuple[str, Table]]:
    ans = summary.get("answer") or {}
    pick = [[by, a["layout"], a["label"], params_text(a["search"]), a["p95_ms"],
             a["bytes_per_vector"]] for by, a in ans.items() if a]
    return [("Tenant layouts", table(summary)),
            ("Answer: the cheapest layout meeting the target",
             Table(["by", "layout", "index", "knob", "p95 ms", "bytes/vector"], pick)),
            ("Flat / index crossover", crossover_table(summary))]


__all__ = ["crossover_table", "recall_distribution", "table", "tables"]
