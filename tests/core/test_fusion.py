"""Fusion: score merge equals a global top-k; RRF matches a hand computation and ranx."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.errors import ConfigError
from retrieval.fusion import from_distances, rrf, rrf_ranx, score_merge
from retrieval.indexes import create_index


def test_rrf_hand_computed_ranks_start_at_one() -> None:
    lists = {"a": [("d1", 0.9), ("d2", 0.8), ("d3", 0.1)], "b": [("d2", 5.0), ("d4", 1.0)]}
    got = rrf(lists, 10, rrf_k=60)
    expected = {
        "d1": 1 / 61,
        "d2": 1 / 62 + 1 / 61,
        "d3": 1 / 63,
        "d4": 1 / 62,
    }
    assert [d for d, _ in got] == ["d2", "d1", "d4", "d3"]
    for d, s in got:
        assert s == pytest.approx(expected[d], rel=1e-12)


def test_rrf_weights_and_dedupe() -> None:
    lists = {
        "a": [("d1", 0.9), ("d2", 0.8), ("d1", 0.7), ("d3", 0.1)],  # d1 twice: best rank only
        "b": [("d2", 5.0), ("d4", 1.0)],
    }
    got = dict(rrf(lists, 10, rrf_k=60, weights={"a": 2.0, "b": 1.0}))
    assert got == pytest.approx(
        {"d1": 2 / 61, "d2": 2 / 62 + 1 / 61, "d3": 2 / 63, "d4": 1 / 62}, rel=1e-12
    )
    assert len(got) == 4
    # k truncates after sorting
    assert [d for d, _ in rrf(lists, 2, weights={"a": 2.0})] == ["d2", "d1"]


def test_rrf_rejects_bad_params() -> None:
    with pytest.raises(ConfigError, match="unknown collection"):
        rrf({"a": [("x", 1.0)]}, 5, weights={"zz": 1.0})
    with pytest.raises(ConfigError, match="rrf_k"):
        rrf({"a": [("x", 1.0)]}, 5, rrf_k=-1)
    with pytest.raises(ConfigError, match="'k'"):
        rrf({"a": [("x", 1.0)]}, 0)


@pytest.mark.slow  # numba compiles ranx's fusion on first use: ~10 s of the fast tier
def test_rrf_matches_ranx() -> None:
    rng = np.random.default_rng(3)
    runs: dict[str, dict[str, list[tuple[str, float]]]] = {"a": {}, "b": {}, "c": {}}
    for q in range(25):
        for name in runs:
            docs = rng.choice(40, size=int(rng.integers(3, 15)), replace=False)
            runs[name][f"q{q}"] = [(f"d{d}", float(-i)) for i, d in enumerate(docs)]
    for rrf_k in (60, 1):
        ref = rrf_ranx(runs, 10, rrf_k=rrf_k)
        for q in ref:
            mine = rrf({n: runs[n][q] for n in runs}, 10, rrf_k=rrf_k)
            assert [d for d, _ in mine] == [d for d, _ in ref[q]]
            assert np.allclose([s for _, s in mine], [s for _, s in ref[q]], rtol=1e-9)


def test_score_merge_keeps_best_score_of_duplicates() -> None:
    got = score_merge({"a": [("x", -0.5), ("y", -0.6)], "b": [("x", -0.1), ("z", -0.9)]}, 3)
    assert got == [("x", -0.1), ("y", -0.6), ("z", -0.9)]


def test_score_merge_equals_global_top_k() -> None:
    """Three exact indexes over a partition of the data, merged by score, answer exactly what one
    exact index over the union answers."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3000, 32)).astype(np.float32)
    q = rng.standard_normal((50, 32)).astype(np.float32)
    parts = {"a": np.arange(0, 1000), "b": np.arange(1000, 2200), "c": np.arange(2200, 3000)}
    k = 10
    union = create_index("faiss-flat", 32, "cosine")
    union.build(x)
    ref = union.search(q, k)
    per_part = {}
    for name, rows in parts.items():
        idx = create_index("faiss-flat", 32, "cosine")
        idx.build(x[rows], ids=rows)
        per_part[name] = idx.search(q, k)
    for i in range(len(q)):
        lists = {
            name: from_distances(r.ids[i], r.distances[i]) for name, r in per_part.items()
        }
        merged = score_merge(lists, k)
        assert [int(d) for d, _ in merged] == ref.ids[i].tolist()
        assert np.allclose([-s for _, s in merged], ref.distances[i], atol=1e-6)


def test_from_distances_skips_missing_and_maps_keys() -> None:
    ids = np.array([2, -1, 0])
    dist = np.array([0.1, np.inf, 0.3], dtype=np.float32)
    got = from_distances(ids, dist, keys=["a", "b", "c"], prefix="col/")
    assert got == [("col/c", pytest.approx(-0.1)), ("col/a", pytest.approx(-0.3))]
