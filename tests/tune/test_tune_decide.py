"""Confidence bounds, the query split and the "cheapest" rule."""

import math

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


# --- goldens: the bounds recomputed by hand (numpy / scipy), so that a wrong level, resample
# count or formula fails ------------------------------------------------------------------------
def _hand_bootstrap(x: np.ndarray, level: float, resamples: int, seed: int) -> float:
    """The percentile bootstrap written out: ``resamples`` means of n queries drawn with
    replacement (one seeded draw), their (1 - level) quantile (inverted CDF: the
    ceil(R (1 - level))-th smallest)."""
    n = x.shape[0]
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    means = np.sort(x[idx].mean(axis=1))
    return float(means[math.ceil(resamples * (1 - level) - 1e-9) - 1])


RECALLS = np.random.default_rng(3).choice([0.5, 0.8, 0.9, 1.0], size=150, p=[.1, .2, .3, .4])


@pytest.mark.parametrize(("level", "resamples"), [
    (0.95, 2000), (0.95, 500), (0.9, 2000), (0.99, 1000), (0.8, 100)])
def test_bootstrap_matches_the_hand_computation(level: float, resamples: int) -> None:
    expect = _hand_bootstrap(RECALLS, level, resamples, seed=11)
    assert bootstrap_lower(RECALLS, level, resamples, 11) == pytest.approx(expect, abs=1e-12)
    conf = ConfidenceSpec(method="bootstrap", level=level, resamples=resamples)
    assert lower_bound(RECALLS, 10, conf, 11) == pytest.approx(expect, abs=1e-12)


def test_bootstrap_level_and_resamples_change_the_bound() -> None:
    """Guards the goldens above against a degenerate sample: each setting gives its own value."""
    values = {(lv, r): lower_bound(RECALLS, 10, ConfidenceSpec(level=lv, resamples=r), 11)
              for lv in (0.9, 0.95, 0.99) for r in (500, 2000)}
    assert len(set(values.values())) == len(values)
    assert values[(0.99, 2000)] < values[(0.95, 2000)] < values[(0.9, 2000)] < RECALLS.mean()


def test_bootstrap_is_near_the_normal_approximation() -> None:
    """On 2000 queries the bootstrap bound is mean - z sd / sqrt(n) with z = Phi^-1(level)
    within 10% of the margin: a two-sided level (z 1.96) or 0.9 (z 1.28) is 19-22% off."""
    from scipy.stats import norm

    x = np.random.default_rng(5).choice([0.0, 0.5, 1.0], size=2000, p=[0.2, 0.2, 0.6])
    se = x.std(ddof=1) / math.sqrt(x.shape[0])
    for level in (0.9, 0.95, 0.99):
        margin = x.mean() - lower_bound(x, 10, ConfidenceSpec(level=level), 0)
        assert margin == pytest.approx(norm.ppf(level) * se, rel=0.1), level


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
@pytest.mark.parametrize(("hits", "n_queries"), [(0, 10), (37, 5), (95, 10), (380, 40), (400, 40)])
def test_binomial_bound_is_the_wilson_lower_end(level: float, hits: int, n_queries: int) -> None:
    """The Wilson lower bound on hits / (n_queries * k), from the formula with
    z = scipy.stats.norm.ppf(level), and scipy's own two-sided Wilson interval at 2 level - 1."""
    from scipy.stats import binomtest, norm

    k = 10
    trials = n_queries * k
    per_query = np.zeros(n_queries)
    per_query[: hits // k] = 1.0
    if hits % k:
        per_query[hits // k] = (hits % k) / k
    p, z = hits / trials, float(norm.ppf(level))
    hand = (p + z * z / (2 * trials) - z * math.sqrt(p * (1 - p) / trials
                                                      + z * z / (4 * trials * trials))) / (
        1 + z * z / trials)
    scipy_low = binomtest(hits, trials).proportion_ci(confidence_level=2 * level - 1,
                                                      method="wilson").low
    got = binomial_lower(per_query, k, level)
    assert got == pytest.approx(max(hand, 0.0), abs=1e-12)
    assert got == pytest.approx(scipy_low, abs=1e-9)
    assert lower_bound(per_query, k, ConfidenceSpec(method="binomial", level=level), 0) == got


def test_binomial_hand_value() -> None:
    """38 of 50 slots at 0.95: Wilson lower end 0.6490 (computed by hand, z = 1.644854)."""
    per_query = np.array([1.0, 1.0, 0.8, 0.6, 0.4])
    assert binomial_lower(per_query, 10, 0.95) == pytest.approx(0.648974, abs=1e-6)
