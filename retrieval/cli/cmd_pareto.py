"""`rwb pareto RUN`: the recall/latency and recall/QPS Pareto fronts of a run (sweep or eval)."""

from __future__ import annotations

import argparse
from typing import Any

from retrieval.cli._common import print_json, print_table
from retrieval.cli.printers import prints


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pareto",
        help="print the recall vs p95 latency and recall vs QPS Pareto fronts of a run",
    )
    p.add_argument("run", help="run directory (rwb sweep or rwb eval)")
    p.add_argument("--json", action="store_true", help="print the front as JSON")
    p.set_defaults(func=run)


def front_of(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The stored front of a sweep, or one computed from the rows of an eval run."""
    if "pareto" in summary:
        return list(summary["pareto"])
    from retrieval.tune.pareto import pareto

    return pareto(summary.get("rows") or [])


def run(args: argparse.Namespace) -> int:
    from retrieval.cli.printers import print_run
    from retrieval.runs import RunDir

    summary = RunDir.open(args.run).read_json("summary.json")
    print_run("pareto", summary, args.run, as_json=args.json)
    return 0


@prints("pareto")
def print_front(summary: dict[str, Any], run: str, as_json: bool = False) -> None:
    """The stored (or computed) recall / latency front of an eval or sweep run."""
    points = front_of(summary)
    if as_json:
        print_json(points)
        return
    target = summary.get("target_recall")
    print(f"Pareto front of {summary.get('run_id', run)}: recall@{summary.get('k')} vs "
          f"single-query p95 ms (p95) and batch QPS (qps)"
          + (f"; target {target}" if target is not None else ""))
    rows = [
        (
            ",".join(p.get("fronts", [])),
            p.get("label") or p.get("backend"),
            p.get("build"),
            p.get("search"),
            p.get("recall"),
            p.get("recall_lb"),
            p.get("p95_ms"),
            p.get("qps"),
        )
        for p in points
    ]
    print_table(rows, ["front", "backend", "build", "search", "recall", "lower", "p95_ms", "qps"])
