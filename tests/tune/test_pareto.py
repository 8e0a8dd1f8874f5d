"""Pareto fronts: recall vs p95 (lower better) and vs QPS (higher better)."""

from retrieval.tune.pareto import front, pareto

ROWS = [
    {"name": "a", "recall": 0.80, "p95_ms": 0.1, "qps": 9000},
    {"name": "b", "recall": 0.90, "p95_ms": 0.2, "qps": 5000},
    {"name": "c", "recall": 0.85, "p95_ms": 0.3, "qps": 6000},  # dominated on p95, not on qps
    {"name": "d", "recall": 0.99, "p95_ms": 0.9, "qps": None},
    {"name": "e", "recall": 0.70, "p95_ms": 0.5, "qps": 1000},  # dominated everywhere
]


def test_fronts():
    assert [ROWS[i]["name"] for i in front(ROWS, "p95_ms", False)] == ["a", "b", "d"]
    assert [ROWS[i]["name"] for i in front(ROWS, "qps", True)] == ["a", "c", "b"]


def test_union_names_the_fronts_of_each_point():
    out = {r["name"]: r["fronts"] for r in pareto(ROWS)}
    assert out == {"a": ["p95_ms", "qps"], "b": ["p95_ms", "qps"], "c": ["qps"], "d": ["p95_ms"]}
