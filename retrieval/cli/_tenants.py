"""Printing the summary of a tenants study (``rwb sweep`` of a spec with ``tenants:``)."""

from __future__ import annotations

from typing import Any

from retrieval.cli._common import fmt, print_table
from retrieval.cli.printers import prints
from retrieval.errors import ConfigError
from retrieval.runs import WORKLOAD_TENANTS


def _num(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


@prints("sweep", WORKLOAD_TENANTS)
def print_tenants(s: dict[str, Any], run_dir: str, as_json: bool = False) -> None:
    t = s["tenants"]
    k = s["k"]
    print(f"{s['name']} on {s['dataset']} (k={k}): tenants study, {t['source']} (sizes "
          f"{t['sizes']['min']}-{t['sizes']['max']}), target recall@{k} >= "
          f"{s['target_recall']} for {t['meeting']:.0%} of tenants")
    rows = [(p["layout"], p["label"], ",".join(f"{a}={fmt(v)}" for a, v in p["search"].items())
             or "-", _num(p.get("tenant_recall_p5")), _num(p.get("tenant_recall_worst1pct")),
             _num(p.get("tenants_meeting")),
             _num((p.get("heldout") or {}).get("tenants_meeting")),
             "yes" if p.get("meets") else "no",
             _num(p.get("p95_ms")), _num(p.get("bytes_per_vector"), 1),
             "-" if p.get("crossover") is None else str(p["crossover"]))
            for p in s["layouts"]]
    print_table(rows, ["layout", "index", "knob", "P5 recall", "worst 1%", "meeting",
                       "held-out meeting", "meets",
                       "p95 ms", "bytes/vec", "crossover"])
    for by, a in (s.get("answer") or {}).items():
        print(f"cheapest {by.removeprefix('by_')}: " + ("none meets the target" if not a else
              f"{a['layout']} ({a['label']}, {a['search']}), p95 {_num(a['p95_ms'])} ms, "
              f"{_num(a['bytes_per_vector'], 1)} bytes/vector"))
    print(f"tenants with < {t['min_queries']} queries are judged pooled per size class "
          f"(powers of two); per-query ids: ids.parquet (layout, tenant, query, ids)")
    print(f"run: {run_dir}")


@prints("pareto", WORKLOAD_TENANTS)
def refuse_front(s: dict[str, Any], run: str, as_json: bool = False) -> None:
    """One recall/latency front would mix layouts judged per tenant: refused."""
    raise ConfigError(f"{run}: a tenants study judges each layout per tenant (no single "
                      f"recall front); see its layouts and answer, or rwb report {run}")
