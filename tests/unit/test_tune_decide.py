"""Confidence bounds, the query split and the "cheapest" rule."""

import numpy as np
import pytest

from retrieval.errors import ConfigError
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import (
    binomial_lower,
    bootstrap_lower,
    choose,
    lower_bound,
    objective_value,
    split_queries,
)
from retrieval.tune.results import PointResult


def test_bootstrap_of_constant_recall_is_exact():
    assert bootstrap_lower(np.full(40, 0.9), 0.95, 500, 0) == 0.9


def test_bootstrap_is_below_the_mean_and_deterministic():
    x = np.random.default_rng(1).choice([0.7, 0.9, 1.0], size=200)
    lb = bootstrap_lower(x, 0.95, 2000, seed=7)
    assert lb < x.mean()
    assert lb == bootstrap_lower(x, 0.95, 2000, seed=7)
    assert bootstrap_lower(x, 0.99, 2000, seed=7) <= lb  # higher level, lower bound


def test_binomial_bound_tightens_with_more_queries():
    few, many = np.full(10, 0.9), np.full(1000, 0.9)
    assert binomial_lower(few, 10, 0.95) < binomial_lower(many, 10, 0.95) < 0.9


def test_lower_bound_dispatches_on_method():
    x = np.full(50, 0.8)
    assert lower_bound(x, 10, ConfidenceSpec(method="bootstrap"), 0) == 0.8
    assert lower_bound(x, 10, ConfidenceSpec(method="binomial"), 0) < 0.8


def test_split_is_seeded_disjoint_and_complete():
    s = split_queries(101, 0.5, seed=3)
    assert s.tune.size + s.heldout.size == 101 and s.heldout.size == 50
    assert not set(s.tune) & set(s.heldout)
    assert np.array_equal(s.tune, split_queries(101, 0.5, seed=3).tune)
    assert not np.array_equal(s.tune, split_queries(101, 0.5, seed=4).tune)
    assert split_queries(10, 0.0, 0).heldout.size == 0
    with pytest.raises(ConfigError, match="heldout_fraction"):
        split_queries(1, 0.5, 0)


def _p(ef, p95, meets, nprobe=None):
    search = {"ef_search": ef} if nprobe is None else {"ef_search": ef, "other": nprobe}
    return PointResult(search, 0.9, 0.9, 0.9, 0.9, 10, p95, p95, p95, 1.0, 0.0, None, meets)


def test_choose_prefers_smallest_knob_value_then_objective():
    pts = [_p(40, 0.5, True), _p(32, 0.6, True), _p(16, 0.1, False)]
    assert choose(pts, "ef_search", "p95_ms").search["ef_search"] == 32  # not the noisy 40
    assert choose(pts, None, "p95_ms").search["ef_search"] == 40
    assert choose([_p(16, 0.1, False)], "ef_search", "p95_ms") is None


def test_objective_qps_takes_the_highest_qps_where_p95_disagrees():
    def point(name, p95, qps):
        return PointResult({"nlist": name}, 0.9, 0.9, 0.9, 0.9, 10, p95, p95, p95, qps, 0.0,
                           None, True)

    pts = [point(1, 0.2, 900.0), point(2, 0.5, 4000.0), point(3, 0.3, None)]
    assert choose(pts, None, "qps").search == {"nlist": 2}  # highest QPS (no QPS = 0)
    assert choose(pts, None, "p95_ms").search == {"nlist": 1}  # lowest p95
    assert objective_value(pts[1], "qps") == -4000.0 and objective_value(pts[0], "p95_ms") == 0.2
