"""Per-entry cache thresholds (retrieval.adaptive.cache) on synthetic pairs: chosen under the
same false-hit upper bound as the global threshold, never fewer tuning hits, reported as what
the probes say."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.adaptive.cache import COST_UNIT, judge_entries, max_false_hits
from retrieval.stats.binomial import upper_bound

CAP, CONF, BOUND = 0.05, 0.95, "wilson"
GRID = np.round(np.arange(0, 61) * 0.005, 10)


def _global(dist: np.ndarray, correct: np.ndarray, tune: np.ndarray) -> float:
    """The global rule, as rwb tune cache has it: the largest grid threshold whose tuning
    false-hit upper bound is <= the cap."""
    n = int(tune.sum())
    ok = [t for t in GRID
          if upper_bound(int(((dist <= t) & ~correct & tune).sum()), n, CONF, BOUND) <= CAP]
    return float(max(ok))


def _pairs(seed: int, informative: bool) -> tuple[np.ndarray, ...]:
    """6,000 probes; their nearest entry sits in a crowded (feature 0.05) or a sparse (0.3)
    neighbourhood. Crowded: a near but wrong entry is common; sparse: a duplicate further away
    is still right. ``informative=False``: the feature is noise."""
    rng = np.random.default_rng(seed)
    n = 6000
    crowded = rng.random(n) < 0.5
    correct = np.where(crowded, rng.random(n) < 0.5, rng.random(n) < 0.8)
    scale = np.where(crowded, 0.08, 0.2)
    dist = np.where(correct, rng.random(n) * scale, scale * 0.5 + rng.random(n) * 0.3)
    feature = np.where(crowded, 0.05, 0.3) + rng.random(n) * 0.01
    if not informative:
        feature = rng.random(n)
    heldout = rng.random(n) < 0.5
    return dist, correct, feature, heldout


@pytest.mark.parametrize("informative", [True, False])
def test_per_entry_thresholds_keep_the_false_hit_upper_bound(informative: bool) -> None:
    dist, correct, feature, heldout = _pairs(0, informative)
    tune = ~heldout
    g = _global(dist, correct, tune)
    e = judge_entries(dist, correct, feature, heldout, GRID, g, max_false_hit=CAP,
                      confidence=CONF, bound=BOUND, bins=2)
    d = e["detail"]
    # the same bound on the same tuning probes as the global threshold
    assert d["tuning"]["false_hit_upper_bound"] <= CAP
    assert d["tuning"]["false_hits"] <= d["false_hit_budget"] == max_false_hits(
        int(tune.sum()), CAP, CONF, BOUND)
    assert d["fixed_tuning"]["false_hit_upper_bound"] <= CAP
    assert d["tuning"]["hits"] >= d["fixed_tuning"]["hits"]
    # recomputed here from the thresholds it reports
    thr = np.where(feature < d["edges"][0], *d["thresholds"]) if d["edges"] else np.full(
        dist.size, d["thresholds"][0])
    hit = dist <= thr
    assert d["heldout"]["hits"] == int(hit[heldout].sum())
    assert e["mean"] == pytest.approx(((hit & ~correct)[heldout]).mean())
    assert e["cost"] == pytest.approx(1 - hit[heldout].mean())
    assert e["cost_unit"] == COST_UNIT and e["p5"] is None
    vs = e["vs_fixed"]
    assert vs["value"] == g
    assert vs["cost"] == pytest.approx(1 - (dist[heldout] <= g).mean())
    assert vs["ratio"] == pytest.approx(e["cost"] / vs["cost"])
    if informative:  # the crowded bin stricter, the sparse one looser: more hits
        assert d["thresholds"][0] < g < d["thresholds"][1]
        assert vs["winner"] == "policy" and vs["verdict"].startswith("per-entry thresholds win")
    else:
        assert (vs["winner"] == "fixed") == vs["verdict"].startswith(
            "the tuned global threshold wins")


def test_the_tail_is_per_bin_and_p5_stays_null() -> None:
    """p5 is null (a probe's outcome is 0 or 1); the tail a single rate hides is each bin's
    held-out false-hit rate, recomputed here for both rules."""
    dist, correct, feature, heldout = _pairs(0, True)
    g = _global(dist, correct, ~heldout)
    e = judge_entries(dist, correct, feature, heldout, GRID, g, max_false_hit=CAP,
                      confidence=CONF, bound=BOUND, bins=2)
    d = e["detail"]
    assert e["p5"] is None and e["vs_fixed"]["p5"] is None
    rows = d["by_bin"]
    assert [r["bin"] for r in rows] == [0, 1] and sum(r["probes"] for r in rows) == heldout.sum()
    crowded = feature < d["edges"][0]
    for r, m in zip(rows, (crowded & heldout, ~crowded & heldout), strict=True):
        assert r["probes"] == m.sum() and r["threshold"] == d["thresholds"][r["bin"]]
        for key, t in (("", r["threshold"]), ("fixed_", g)):
            hit = dist[m] <= t
            assert r[f"{key}hit_rate"] == pytest.approx(hit.mean())
            assert r[f"{key}false_hit_rate"] == pytest.approx((hit & ~correct[m]).mean())
    assert d["worst_bin_false_hit_rate"] == max(r["false_hit_rate"] for r in rows)
    assert d["fixed_worst_bin_false_hit_rate"] == max(r["fixed_false_hit_rate"] for r in rows)
    # the crowded bin is where the global threshold's false hits sit
    assert rows[0]["fixed_false_hit_rate"] > rows[1]["fixed_false_hit_rate"]


def test_no_feasible_threshold_is_said() -> None:
    dist, correct, feature, heldout = _pairs(1, True)
    e = judge_entries(dist, np.zeros_like(correct), feature, heldout, GRID, None,
                      max_false_hit=CAP, confidence=CONF, bound=BOUND)
    assert "no threshold meets the false-hit cap" in e["skipped"]


def test_the_entry_feature_leaves_out_the_entry_and_the_probe() -> None:
    from retrieval.adaptive.cache import neighbourhood

    got = neighbourhood(np.array([5, 6, 8]), np.array([1, 2, -1]), np.array([1, 2]),
                        np.array([[1, 5, 7], [2, 9, 6]]), np.array([[0, .1, .2], [0, .3, .4]]))
    assert got[:2].tolist() == [0.2, 0.3] and np.isnan(got[2])
