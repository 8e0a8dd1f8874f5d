"""`rwb pareto RUN`: the recall/latency and recall/QPS Pareto fronts of a run (sweep or eval)."""

from __future__ import annotations

import argparse

from retrieval.cli._common import print_json, print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pareto",
        help="print the recall vs p95 latency and recall vs QPS Pareto fronts of a run",
    )
    p.add_argument("run", help="run directory (rwb sweep or rwb eval)")
    p.add_argument("--json", action="store_true", help="print the front as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.api import pareto_front

    front = pareto_front(args.run)
    points = list(front.points)
    if args.json:
        print_json(points)
        return 0
    target = front.target_recall
    print(f"Pareto front of {front.run_id}: recall@{front.k} vs "
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
    return 0
