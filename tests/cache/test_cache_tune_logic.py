"""Threshold tuning logic without Redis: labels, design, sweep, choice, spec validation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from retrieval.cache.spec import parse_cache_spec
from retrieval.cache.tune import (
    choose_threshold,
    curve_rows,
    design_probes,
    exclude_self,
    qqp_labels,
    sweep_counts,
)
from retrieval.errors import ConfigError, DataError
from retrieval.stats.binomial import upper_bound, wilson_upper


@dataclass(frozen=True)
class Pair:
    text_a: str
    text_b: str
    label: int


PAIRS = [
    Pair("how do i learn python", "what is the best way to learn python", 1),
    Pair("how do i learn python", "how do i learn java", 0),
    Pair("what is love", "what is love in psychology", 0),
    Pair("capital of france", "what is the capital of france", 1),
    Pair("best pizza in rome", "where to eat pizza in rome", 1),
    Pair("is coffee healthy", "is tea healthy", 0),
]


def test_qqp_labels_ids_in_first_seen_order_and_fingerprint() -> None:
    lab = qqp_labels(PAIRS)
    assert lab.questions[:3] == ["how do i learn python", "what is the best way to learn python",
                                 "how do i learn java"]
    assert lab.n_questions == 11
    assert lab.pair_a.tolist()[:2] == [0, 0]
    assert lab.fingerprint == qqp_labels(list(PAIRS)).fingerprint
    assert lab.fingerprint != qqp_labels(PAIRS[:-1]).fingerprint
    with pytest.raises(DataError, match="label 2"):
        qqp_labels([Pair("a", "b", 2)])


def test_design_stores_everything_probes_text_b_and_splits_by_component() -> None:
    lab = qqp_labels(PAIRS)
    spec = parse_cache_spec({"split": {"heldout_fraction": 0.5, "seed": 3}})
    d = design_probes(lab, spec)
    assert sorted(d.stored.tolist()) == list(range(11))
    assert sorted(d.probes.tolist()) == sorted(set(lab.pair_b.tolist()))
    # the two pairs sharing "how do i learn python" form one component: same split
    b_of = {lab.questions[q]: i for i, q in enumerate(d.probes)}
    i1, i2 = b_of["what is the best way to learn python"], b_of["how do i learn java"]
    assert d.heldout[i1] == d.heldout[i2]
    # positive: a labelled duplicate of the probe is stored
    assert d.positive[i1] and not d.positive[i2]
    q_py, q_best, q_java = 0, 1, 2
    assert d.is_duplicate(np.array([q_best, q_java, q_best]),
                          np.array([q_py, q_py, -1])).tolist() == [True, False, False]


def test_design_subset_and_distractor_bounds() -> None:
    lab = qqp_labels(PAIRS)
    spec = parse_cache_spec({"pairs": {"limit": 10}})
    with pytest.raises(ConfigError, match=r"field 'pairs.limit' must be <= 6"):
        design_probes(lab, spec)
    spec = parse_cache_spec({"pairs": {"limit": None}, "distractors": 1})
    with pytest.raises(ConfigError, match=r"field 'distractors' must be <= 0"):
        design_probes(lab, spec)


def test_sweep_counts_inclusive() -> None:
    dist = np.array([0.1, 0.2, 0.2, 0.5, np.inf])
    correct = np.array([True, False, True, True, False])
    hits, corr = sweep_counts(dist, correct, np.array([0.0, 0.1, 0.2, 0.49, 0.5, 2.0]))
    assert hits.tolist() == [0, 1, 3, 3, 4, 4]
    assert corr.tolist() == [0, 1, 2, 2, 3, 3]


def test_exclude_self_takes_first_other_neighbour() -> None:
    probes = np.array([5, 6, 7])
    keys = np.array([["c:5", "c:9"], ["c:3", "c:6"], [None, None]], dtype=object)
    dists = np.array([[0.0, 0.3], [0.1, 0.2], [np.inf, np.inf]])
    nn, nd = exclude_self(probes, keys, dists)
    assert nn.tolist() == [9, 3, -1]
    assert nd.tolist()[:2] == [0.3, 0.1] and np.isinf(nd[2])


class _Design:
    def __init__(self, heldout: np.ndarray, positive: np.ndarray) -> None:
        self.heldout, self.positive = heldout, positive


def test_choose_largest_threshold_under_the_bound() -> None:
    rng = np.random.default_rng(0)
    n = 4000
    positive = rng.random(n) < 0.4
    # duplicates sit close, non-duplicates further away; a few false neighbours are close
    dist = np.where(positive, rng.uniform(0.0, 0.3, n), rng.uniform(0.1, 0.6, n))
    correct = positive & (rng.random(n) < 0.9)
    heldout = rng.random(n) < 0.5
    spec = parse_cache_spec({"tuning": {"max_false_hit": 0.05, "grid_step": 0.001,
                                        "curve_step": 0.05}})
    res = choose_threshold(dist, correct, _Design(heldout, positive), spec)  # type: ignore[arg-type]
    assert res.threshold is not None and res.tuning is not None and res.heldout is not None
    t = res.threshold.cosine_distance
    tun = ~heldout
    false = int(((dist[tun] <= t) & ~correct[tun]).sum())
    assert res.tuning.false_hits == false
    assert res.tuning.false_hit_upper_bound == pytest.approx(
        float(wilson_upper(false, int(tun.sum()), 0.95)))
    assert res.tuning.false_hit_upper_bound <= 0.05
    # one grid step further breaks the cap (it is the largest feasible threshold)
    t2 = t + 0.001
    false2 = int(((dist[tun] <= t2) & ~correct[tun]).sum())
    assert wilson_upper(false2, int(tun.sum()), 0.95) > 0.05
    assert res.heldout.probes == int(heldout.sum())
    rows = curve_rows(res, 0.05)
    tuning_rows = [r for r in rows if r["split"] == "tuning"]
    hr = [r["hit_rate"] for r in tuning_rows]
    assert hr == sorted(hr) and any(abs(r["threshold"] - t) < 1e-12 for r in tuning_rows)
    assert {r["threshold_unit"] for r in rows} == {"cosine_distance"}


def test_infeasible_cap_is_reported_not_raised() -> None:
    dist = np.zeros(50)
    correct = np.zeros(50, dtype=bool)
    d = _Design(np.arange(50) % 2 == 0, np.zeros(50, dtype=bool))
    spec = parse_cache_spec({"tuning": {"max_false_hit": 0.01}})
    res = choose_threshold(dist, correct, d, spec)  # type: ignore[arg-type]
    assert res.threshold is None and "no threshold meets the cap" in res.reason


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tuning": {"max_false_hit": 1.5}}, r"field 'tuning.max_false_hit' must be < 1"),
        ({"tuning": {"bound": "agresti"}}, r"field 'tuning.bound' must be 'wilson' or "
                                           r"'clopper_pearson'"),
        ({"tuning": {"grid_step": 0.01, "curve_step": 0.001}}, r"curve_step .* must be >= "
                                                               r"grid_step"),
        ({"latency": {"sizes": [100, 10]}}, r"sizes must be increasing"),
        ({"latency": {"threshold": {"value": 3, "unit": "cosine_distance"}}},
         r"\[0, 2\] for unit cosine_distance"),
        ({"probe_side": "text_c"}, r"field 'probe_side' must be 'text_a' or 'text_b'"),
        ({"cache": {"index": {"algorithm": "ivf"}}}, r"field 'cache.index.algorithm'"),
        ({"threshold": 0.2}, r"qqp.yaml: unknown parameter 'threshold'.*allowed: adaptive, cache"),
    ],
)
def test_spec_errors_name_field_and_value(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_cache_spec(data, source="qqp.yaml")


def test_shipped_spec_loads() -> None:
    from retrieval.cache.spec import load_cache_spec
    from retrieval.paths import REPO_ROOT

    spec = load_cache_spec(REPO_ROOT / "sweeps" / "qqp-cache.yaml")
    assert spec.pairs.limit is None and spec.latency.sizes == [10_000, 100_000]
    assert spec.cost.usd_per_call == pytest.approx((2.5 * 150 + 10.0 * 350) / 1e6)
    with pytest.raises(ConfigError, match="does not exist"):
        load_cache_spec(REPO_ROOT / "sweeps" / "nope.yaml")


def test_clopper_pearson_bound_in_the_tuner_matches_scipy_beta_quantiles() -> None:
    """``tuning.bound: clopper_pearson``: every grid point's bound is scipy's
    ``beta.ppf(confidence, false + 1, n - false)`` (1 when every probe false-hits), the choice is
    the largest threshold under the cap by that bound, and it is stricter than Wilson here."""
    from scipy.stats import beta

    rng = np.random.default_rng(4)
    n = 2000
    positive = rng.random(n) < 0.4
    dist = np.where(positive, rng.uniform(0.0, 0.3, n), rng.uniform(0.05, 0.6, n))
    correct = positive & (rng.random(n) < 0.9)
    heldout = rng.random(n) < 0.5
    design = _Design(heldout, positive)
    tuning = {"max_false_hit": 0.05, "grid_step": 0.001, "curve_step": 0.05,
              "confidence": 0.9}
    cp = choose_threshold(dist, correct, design,  # type: ignore[arg-type]
                          parse_cache_spec({"tuning": {**tuning, "bound": "clopper_pearson"}}))
    wilson = choose_threshold(dist, correct, design,  # type: ignore[arg-type]
                              parse_cache_spec({"tuning": tuning}))
    tun = ~heldout
    m = int(tun.sum())
    table = cp.tables["tuning"]
    false = table["false_hits"].astype(np.float64)
    expect = np.where(false >= m, 1.0, beta.ppf(0.9, false + 1, np.maximum(m - false, 1)))
    np.testing.assert_allclose(table["false_hit_upper_bound"], expect, rtol=1e-12, atol=0)
    # golden: 5 false hits in 300 probes at 0.9 (scipy 1.17 beta.ppf(0.9, 6, 295))
    assert float(upper_bound(5, 300, 0.9, "clopper_pearson")) == pytest.approx(
        0.030695590943878668, rel=1e-12)
    assert cp.threshold is not None and wilson.threshold is not None and cp.tuning is not None
    feasible = np.flatnonzero(expect <= 0.05)
    assert cp.threshold.cosine_distance == pytest.approx(table["threshold"][feasible.max()])
    assert cp.tuning.false_hit_upper_bound == pytest.approx(expect[feasible.max()], rel=1e-12)
    assert cp.threshold.cosine_distance < wilson.threshold.cosine_distance  # exact is stricter
