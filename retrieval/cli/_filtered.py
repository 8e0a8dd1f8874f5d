"""Printing the filtered-search results of `rwb eval` / `rwb sweep` (specs with ``filters:``)."""

from __future__ import annotations

from typing import Any

from retrieval.cli._common import fmt, print_table
from retrieval.cli.printers import prints
from retrieval.errors import ConfigError
from retrieval.runs import WORKLOAD_FILTERED


def _search(d: dict[str, Any] | None) -> str:
    return ",".join(f"{k}={fmt(v)}" for k, v in (d or {}).items()) or "-"


def _cliff_lines(s: dict[str, Any]) -> None:
    for label, by in (s.get("cliff_by_strategy") or {}).items():
        parts = ", ".join(f"{st} {fmt(v) if v is not None else 'none'}" for st, v in by.items())
        best = (s.get("cliff_selectivity") or {}).get(label)
        print(f"cliff {label}: best {fmt(best) if best is not None else 'none'} ({parts})")


@prints("eval", WORKLOAD_FILTERED)
def print_filtered_eval(s: dict[str, Any], run_dir: str, as_json: bool = False) -> None:
    print(f"dataset {s['dataset']}  k={s['k']}  (filtered recall@k, fewer-than-k rule; latency "
          f"single-query ms, each query with its filter; QPS batch)")
    rows = [(r["label"], r["strategy"], _search(r["search"]) if r["strategy"] != "prefilter"
             else "-", r.get("overfetch") or "-", r["bucket"], r["selectivity"], r["recall"],
             r["recall_p5"], r.get("share_below_target", "-"), r["p50_ms"], r["p95_ms"],
             r["p99_ms"], r["qps"]) for r in s["rows"]]
    print_table(rows, ["index", "strategy", "search", "overfetch", "bucket", "selectivity",
                       "recall", "p5", "below", "p50_ms", "p95_ms", "p99_ms", "qps"])
    _cliff_lines(s)
    print(f"run directory: {run_dir}")


@prints("sweep", WORKLOAD_FILTERED)
def print_filtered_sweep(s: dict[str, Any], run_dir: str, as_json: bool = False) -> None:
    print(f"{s['name']} on {s['dataset']} (k={s['k']}): target filtered recall@{s['k']} >= "
          f"{s.get('target_recall')}, strategy target, per bucket and filtering strategy")
    rows = [(c["label"], c["strategy"], c["bucket"], c["selectivity"],
             _search(c.get("knob")) if c.get("chosen") else "infeasible",
             c.get("recall_lb"), c.get("heldout_recall"), c.get("p95_ms"))
            for c in s["choices"]]
    print_table(rows, ["index", "strategy", "bucket", "selectivity", "knob", "recall_lb",
                       "heldout", "p95_ms"])
    print("operating points (cheapest p95 meeting the target, held-out checked):")
    ops = [(o["bucket"], o["selectivity"], o["label"], o["strategy"], _search(o["knob"]),
            o["p95_ms"], o.get("heldout_recall")) for o in s["operating_points"]]
    print_table(ops, ["bucket", "selectivity", "index", "strategy", "knob", "p95_ms",
                      "heldout"])
    _cliff_lines(s)
    print(f"run directory: {run_dir}")


@prints("pareto", WORKLOAD_FILTERED)
def refuse_front(s: dict[str, Any], run: str, as_json: bool = False) -> None:
    """One front across selectivity buckets would mix workloads: refused."""
    raise ConfigError(f"{run}: a filtered-search run has one trade-off per selectivity "
                      f"bucket; see its rows, operating_points, or rwb report {run}")
