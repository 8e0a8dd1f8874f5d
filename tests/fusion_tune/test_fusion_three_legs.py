"""The sparse leg in the fusion spec (``sparse: {engine: qdrant}``) and the three-leg grid."""

from __future__ import annotations

import pytest

from retrieval.errors import ConfigError
from retrieval.fusion_tune.fuse import grid, weight_vectors
from retrieval.fusion_tune.spec import grid_of, legs_of, parse_fusion_spec


def test_two_leg_weights_unchanged() -> None:
    assert weight_vectors([0.3, 0.7], 2) == [(0.3, 0.7), (0.7, 0.3)]


def test_three_leg_weights_are_normalised_distinct_triples() -> None:
    got = weight_vectors([0.0, 0.5, 1.0], 3)
    assert all(abs(sum(w) - 1.0) < 1e-5 for w in got)
    assert len(got) == len(set(got))
    assert (1 / 3, 1 / 3, 1 / 3) not in got and (0.333333, 0.333333, 0.333333) in got
    assert (1.0, 0.0, 0.0) in got and (0.0, 0.0, 1.0) in got  # each leg alone too
    # 26 non-zero triples; proportional ones merge: one leg (0.5 ~ 1: -3), two equal legs
    # (0.5/0.5 ~ 1/1: -3), all equal (-1)
    assert len(got) == 26 - 3 - 3 - 1


def test_three_leg_grid_tunes_each_legs_depth() -> None:
    cands = grid(["rrf"], ["dbsf"], [0.5, 1.0], [60], [10, 20], ("dense", "bm25", "sparse"))
    assert len(cands) == len(weight_vectors([0.5, 1.0], 3)) * 2 ** 3
    assert all(set(c.params()["weights"]) == {"dense", "bm25", "sparse"} for c in cands)
    assert {c.depths for c in cands} == {(a, b, c) for a in (10, 20) for b in (10, 20)
                                         for c in (10, 20)}


def test_spec_names_the_sparse_leg() -> None:
    spec = parse_fusion_spec({"dataset": "scifact", "sparse": {"engine": "qdrant"}})
    assert legs_of(spec) == ("dense", "bm25", "sparse")
    assert legs_of(parse_fusion_spec({"dataset": "scifact"})) == ("dense", "bm25")
    with pytest.raises(ConfigError, match=r"sparse\.engine.*qdrant.*faiss"):
        parse_fusion_spec({"dataset": "scifact", "sparse": {"engine": "faiss"}})
    with pytest.raises(ConfigError, match=r"sparse"):  # extra="forbid"
        parse_fusion_spec({"dataset": "scifact", "sparse": {"engine": "qdrant", "k1": 2}})
    with pytest.raises(ConfigError, match=r"bm25\.implementation"):
        parse_fusion_spec({"dataset": "scifact", "sparse": {"engine": "qdrant"},
                           "bm25": {"implementation": "rank-bm25"}})


def test_a_grid_too_large_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"fusion.*at most 20000 candidates.*received"):
        parse_fusion_spec({"dataset": "scifact", "sparse": {"engine": "qdrant"},
                           "fusion": {"methods": ["rrf", "convex"]}})  # two-leg lists, cubed
    three = parse_fusion_spec({"dataset": "scifact", "sparse": {"engine": "qdrant"}})
    assert len(grid_of(three)) == 19 * 27 * 5  # no fusion block: the three-leg defaults
    spec = parse_fusion_spec({"dataset": "scifact", "sparse": {"engine": "qdrant"},
                              "fusion": {"weights": [0.2, 0.5, 1.0], "depths": [20, 100]}})
    assert 0 < len(grid_of(spec)) <= 20_000
