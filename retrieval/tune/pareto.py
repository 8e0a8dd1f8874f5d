"""Pareto fronts of measured configs: recall@k against single-query p95 latency (ms, lower is
better) and against batch QPS (higher is better), across every backend and build.

A point is on a front when no other point has recall >= its recall *and* a strictly better cost
(or a strictly higher recall at no worse cost). Pure functions over plain rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval.stats.pareto import pareto_indices

FRONTS: dict[str, bool] = {"p95_ms": False, "qps": True}  # cost key -> higher is better


def front(rows: Sequence[Mapping[str, Any]], cost: str, higher_is_better: bool) -> list[int]:
    """Indices of ``rows`` on the recall-vs-``cost`` front (:func:`retrieval.stats.pareto.
    pareto_indices`), best cost first, one row per (recall, cost) pair; rows without a value of
    ``cost`` are skipped."""
    usable = [
        (i, float(r["recall"]), float(r[cost]))
        for i, r in enumerate(rows)
        if r.get(cost) is not None and r.get("recall") is not None
    ]
    # sort from the best cost to the worst; ties: higher recall first
    usable.sort(key=lambda t: (-t[2] if higher_is_better else t[2], -t[1]))
    kept = pareto_indices([(r, c) for _, r, c in usable], (True, higher_is_better))
    out: list[int] = []
    seen: set[tuple[float, float]] = set()
    for j in kept:  # ascending = best cost first
        i, recall, c = usable[j]
        if (recall, c) not in seen:
            seen.add((recall, c))
            out.append(i)
    return out


def front3(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of ``rows`` on the three-way front: recall (higher), single-query p95 ms
    (lower), measured bytes per vector (lower); rows missing one of them are skipped."""
    keys = ("recall", "p95_ms", "bytes_per_vector")
    usable = [i for i, r in enumerate(rows) if all(r.get(k) is not None for k in keys)]
    objs = [[float(rows[i][k]) for k in keys] for i in usable]
    return [usable[j] for j in pareto_indices(objs, (True, False, False))]


def pareto(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The union of the fronts: each row once, with ``fronts`` naming the fronts it is on
    (``p95_ms``, ``qps``, and ``recall_p95_bytes`` when memory was measured), ordered by recall
    (ascending)."""
    on: dict[int, list[str]] = {}
    for cost, higher in FRONTS.items():
        for i in front(rows, cost, higher):
            on.setdefault(i, []).append(cost)
    for i in front3(rows):
        on.setdefault(i, []).append("recall_p95_bytes")
    out = [{**rows[i], "fronts": names} for i, names in on.items()]
    out.sort(key=lambda r: (float(r["recall"]), -(float(r.get("qps") or 0.0))))
    return out
