"""BM25 fallback router: threshold semantics, per-query selection, threshold choice."""

import math

import numpy as np
import pytest

from retrieval.errors import ConfigError, DataError
from retrieval.rerank.route import (
    RouteInputs,
    candidate_thresholds,
    choose_threshold,
    evaluate_threshold,
    route_mask,
    routed_rankings,
    sweep_thresholds,
)


def test_route_mask_is_strictly_below_threshold():
    top1 = np.array([0.2, 0.5, 0.8, -np.inf])
    assert route_mask(top1, 0.5).tolist() == [True, False, False, True]
    assert not route_mask(top1, -math.inf).any()
    assert route_mask(top1, math.inf).all()
    with pytest.raises(ConfigError, match="field 'threshold'"):
        route_mask(top1, float("nan"))
    with pytest.raises(ConfigError, match="field 'threshold'"):
        route_mask(top1, "0.5")  # type: ignore[arg-type]


def test_routed_rankings_pick_per_query():
    out = routed_rankings(["a", "b"], {"a": ["p1"], "b": ["p2"]}, {"a": ["f1"], "b": ["f2"]},
                          np.array([True, False]))
    assert out == {"a": ["f1"], "b": ["p2"]}


def _inputs():
    # q0, q1 are confident dense queries; q2, q3 are long-tail (low top-1) where BM25 is better
    return RouteInputs(
        query_ids=("q0", "q1", "q2", "q3"),
        top1=np.array([0.8, 0.7, 0.3, 0.2]),
        primary_quality=np.array([1.0, 0.8, 0.1, 0.0]),
        fallback_quality=np.array([0.5, 0.6, 0.9, 0.7]),
        primary_ms=np.array([100.0, 100.0, 100.0, 100.0]),  # dense + rerank
        fallback_ms=np.array([20.0, 20.0, 20.0, 20.0]),  # dense + BM25, no rerank
    )


def test_evaluate_threshold_counts_the_right_path_per_query():
    p = evaluate_threshold(_inputs(), 0.5)
    assert p.routed_share == 0.5
    assert p.quality == pytest.approx((1.0 + 0.8 + 0.9 + 0.7) / 4)
    assert p.latency["mean_ms"] == pytest.approx(60.0)
    never = evaluate_threshold(_inputs(), -math.inf)
    assert never.routed_share == 0 and never.quality == pytest.approx(0.475)
    assert never.as_row()["policy"] == "never" and never.as_row()["threshold"] is None


def test_choose_threshold_trades_latency_within_quality_tolerance():
    points = sweep_thresholds(_inputs(), candidate_thresholds(_inputs().top1, 4))
    best = choose_threshold(points, tolerance=0.0)
    assert best.quality == pytest.approx(0.85) and best.routed_share == 0.5
    # a loose tolerance lets the cheaper "route everything" win
    loose = choose_threshold(points, tolerance=0.5)
    assert loose.routed_share == 1.0
    with pytest.raises(ConfigError):
        choose_threshold(points, tolerance=2.0)
    with pytest.raises(ConfigError):
        choose_threshold([], tolerance=0.0)


def test_candidate_thresholds_and_subset():
    th = candidate_thresholds(np.array([0.1, 0.4, -np.inf, 0.9]), 2)
    assert th[0] == -math.inf and th[-1] == math.inf and 0.1 in th and 0.9 in th
    sub = _inputs().subset(["q3", "q0"])
    assert sub.query_ids == ("q3", "q0") and sub.top1.tolist() == [0.2, 0.8]
    with pytest.raises(DataError, match="unknown query ids"):
        _inputs().subset(["zz"])
    with pytest.raises(DataError, match="shape"):
        RouteInputs(("a",), np.zeros(2), np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1))


def test_a_router_that_loses_on_the_heldout_queries_is_flagged_and_not_recommended():
    """Issue 34 new user 8: held-out nDCG@10 0.362 with the router vs 0.419 never routing, and
    the export still recommended the router; no small-sample warning with 38 queries."""
    from retrieval.exporting.rerank import recommendation
    from retrieval.rerank.run import router_verdict

    v = router_verdict(0.362, 0.419, 0.01, 38)
    assert v["loses"] and not v["recommended"] and v["small_sample"]
    assert "LOSES" in v["line"] and "38 held-out queries" in v["line"]
    router = {"rule": "r", "threshold": 0.5, "primary_rerank_depth": 20, "heldout_verdict": v}
    use = recommendation(20, router)
    assert use.startswith("rerank: re-score every query") and "not the router" in use
    ok = router_verdict(0.415, 0.419, 0.01, 200)
    assert not ok["loses"] and not ok["small_sample"]
    assert recommendation(20, {**router, "heldout_verdict": ok}).startswith("router:")
