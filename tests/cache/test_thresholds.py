"""Typed thresholds: units, ranges, and the pinned conversions to each library's convention."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.cache.thresholds import (
    CONVENTIONS,
    Threshold,
    ThresholdSpec,
    ThresholdUnit,
    convention,
)
from retrieval.errors import ConfigError
from retrieval.params import validate_params


def test_units_and_their_relation() -> None:
    t = Threshold.distance(0.2)
    assert t.unit is ThresholdUnit.COSINE_DISTANCE
    assert t.cosine_distance == 0.2
    assert t.cosine_similarity == pytest.approx(0.8, abs=1e-15)
    s = Threshold.similarity(0.8)
    assert s.cosine_distance == pytest.approx(0.2, abs=1e-15)
    assert s.to("cosine_distance").value == pytest.approx(0.2, abs=1e-15)
    assert Threshold(1.5, "cosine_distance").cosine_similarity == -0.5
    assert Threshold(-1.0, "cosine_similarity").cosine_distance == 2.0
    assert str(Threshold.distance(0.25)) == "0.25 (cosine_distance)"
    assert Threshold.distance(0.25).to_dict() == {"value": 0.25, "unit": "cosine_distance"}


def test_hit_test_is_inclusive_like_vector_range() -> None:
    t = Threshold.distance(0.25)
    assert t.accepts(0.25)
    assert not t.accepts(0.2500001)
    assert list(t.accepts(np.array([0.0, 0.25, 0.3]))) == [True, True, False]


@pytest.mark.parametrize(
    ("value", "unit", "message"),
    [
        (2.5, "cosine_distance", r"field 'threshold' must be in \[0, 2\] for unit cosine_distance "
                                 r"\(lower is stricter\); received 2.5"),
        (-0.01, "cosine_distance", r"in \[0, 2\] for unit cosine_distance.*received -0.01"),
        (1.2, "cosine_similarity", r"field 'threshold' must be in \[-1, 1\] for unit "
                                   r"cosine_similarity \(higher is stricter\); received 1.2"),
        (math.nan, "cosine_distance", r"received nan"),
        ("0.2", "cosine_distance", r"must be a number in \[0, 2\]"),
    ],
)
def test_out_of_range_or_wrong_type_is_a_config_error(value: object, unit: str,
                                                      message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Threshold(value, unit)  # type: ignore[arg-type]


def test_unknown_unit_names_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown threshold unit 'similarity'; allowed: "
                                          r"cosine_distance, cosine_similarity"):
        Threshold(0.8, "similarity")  # type: ignore[arg-type]


def test_similarity_value_given_as_distance_is_caught_when_out_of_range() -> None:
    # a GPTCache-style 0.8 *similarity* read as distance is legal (0.8 distance) but differs;
    # a negative similarity given as distance is out of range
    assert Threshold.distance(0.8).cosine_similarity == pytest.approx(0.2)
    with pytest.raises(ConfigError, match="cosine_distance"):
        Threshold.distance(-0.5)


# -- conventions (each pinned to the upstream source named in CONVENTIONS[...].source) --------


def test_redisvl_distance_threshold_is_cosine_distance() -> None:
    # redisvl SemanticCache(distance_threshold=0.1) default; VECTOR_RANGE on COSINE
    assert Threshold.distance(0.1).to_convention("redisvl") == 0.1
    assert Threshold.from_convention("redisvl", 0.1) == Threshold.distance(0.1)
    assert Threshold.similarity(0.9).to_convention("redisvl") == pytest.approx(0.1, abs=1e-15)
    with pytest.raises(ConfigError, match=r"redisvl threshold: field 'distance_threshold' must "
                                          r"be in \[0, 2\].*received 2.1"):
        Threshold.from_convention("redisvl", 2.1)


def test_langchain_conventions() -> None:
    # langchain_redis.RedisSemanticCache(distance_threshold=0.2) -> redisvl, identical units
    assert Threshold.distance(0.2).to_convention("langchain") == 0.2
    # langchain_community RedisSemanticCache(score_threshold=0.2) -> VECTOR_RANGE 0.2 (distance)
    assert Threshold.from_convention("langchain_community", 0.2).cosine_distance == 0.2
    assert Threshold.distance(0.35).to_convention("langchain_community") == 0.35
    # 0 is falsy there: it silently becomes an unthresholded KNN, so it cannot be expressed
    with pytest.raises(ConfigError, match=r"field 'score_threshold' must be in \(0, 2\].*"
                                          r"always hits.*received 0.0"):
        Threshold.distance(0.0).to_convention("langchain_community")


@pytest.mark.parametrize(
    ("distance", "gptcache_similarity"),
    [(0.0, 1.0), (0.2, 0.9), (0.4, 0.8), (1.0, 0.5), (2.0, 0.0)],
)
def test_gptcache_similarity_threshold(distance: float, gptcache_similarity: float) -> None:
    # GPTCache default similarity_threshold 0.8 with faiss squared-L2 + SearchDistanceEvaluation
    # (max_distance 4): hit iff 4 - d_l2sq >= 4 * 0.8  <=>  d_l2sq <= 0.8  <=>  d_cos <= 0.4
    t = Threshold.distance(distance)
    assert t.to_convention("gptcache") == pytest.approx(gptcache_similarity, abs=1e-15)
    back = Threshold.from_convention("gptcache", gptcache_similarity)
    assert back.cosine_distance == pytest.approx(distance, abs=1e-15)


def test_gptcache_rule_reproduced_on_real_vectors() -> None:
    """Simulate GPTCache's decision on unit vectors and compare with the converted threshold."""
    rng = np.random.default_rng(0)
    q = rng.normal(size=(500, 16))
    c = rng.normal(size=(500, 16))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    l2sq = ((q - c) ** 2).sum(axis=1)  # what faiss METRIC_L2 returns
    d_cos = 1.0 - (q * c).sum(axis=1)
    for s in (0.3, 0.5, 0.62, 0.8):
        rank = 4.0 - np.clip(l2sq, 0.0, 4.0)  # SearchDistanceEvaluation, positive=False
        gptcache_hit = rank >= (4.0 - 0.0) * s  # adapter: rank_threshold <= rank
        ours = Threshold.from_convention("gptcache", s).accepts(d_cos)
        disagree = np.flatnonzero(gptcache_hit != ours)
        # only float rounding at the exact boundary may differ
        assert all(abs(d_cos[i] - 2 * (1 - s)) < 1e-9 for i in disagree)
        assert gptcache_hit.sum() > 0


def test_gptcache_out_of_range_and_unknown_convention() -> None:
    with pytest.raises(ConfigError, match=r"gptcache threshold: field 'similarity_threshold' "
                                          r"must be in \[0, 1\] \(higher is stricter\); "
                                          r"received 1.5"):
        Threshold.from_convention("gptcache", 1.5)
    with pytest.raises(ConfigError, match=r"unknown threshold convention 'gpt_cache'.*Did you "
                                          r"mean 'gptcache'"):
        convention("gpt_cache")
    assert set(CONVENTIONS) == {"redisvl", "langchain", "langchain_community", "gptcache"}
    assert all(c.source for c in CONVENTIONS.values())


def test_threshold_spec_in_yaml_models() -> None:
    spec = validate_params(ThresholdSpec, {"value": 0.9, "unit": "cosine_similarity"})
    assert spec.threshold().cosine_distance == pytest.approx(0.1)
    with pytest.raises(ConfigError, match=r"spec.yaml: field 'threshold'.*\[-1, 1\].*1.5"):
        validate_params(ThresholdSpec, {"value": 1.5, "unit": "cosine_similarity"},
                        where="spec.yaml", prefix="threshold")
    with pytest.raises(ConfigError, match="unit"):
        validate_params(ThresholdSpec, {"value": 0.5, "unit": "percent"})
