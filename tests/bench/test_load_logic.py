"""The load harness's pure logic: schedules, HDR percentiles against a hand-computed correction on
the same timestamps, Little's law, the SLO rule and the capacity search over rates."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.bench.load.capacity import search_capacity
from retrieval.bench.load.stats import (
    OK,
    Recording,
    hand_corrected_p,
    histogram,
    meets_slo,
    percentiles_ms,
    schedule_offsets_ns,
    summarise_point,
)


def test_fixed_schedule_is_evenly_spaced():
    t = schedule_offsets_ns(250.0, 2.0, "fixed")
    assert t.shape == (500,) and t[0] == 0
    assert np.all(np.diff(t) == 4_000_000)


def test_poisson_schedule_has_the_rate_and_is_seeded():
    a = schedule_offsets_ns(2000.0, 5.0, "poisson", seed=7)
    b = schedule_offsets_ns(2000.0, 5.0, "poisson", seed=7)
    c = schedule_offsets_ns(2000.0, 5.0, "poisson", seed=8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.all(np.diff(a) >= 0) and a[-1] < 5e9
    assert a.shape[0] == pytest.approx(10_000, rel=0.05)
    gaps = np.diff(a) / 1e9
    assert gaps.mean() == pytest.approx(1 / 2000, rel=0.05)
    assert gaps.std() == pytest.approx(gaps.mean(), rel=0.1)  # exponential: sd = mean


@pytest.mark.parametrize("rate", [0.0, -5.0, float("nan"), float("inf")])
def test_schedule_refuses_a_bad_rate(rate):
    with pytest.raises(ValueError, match="rate_qps"):
        schedule_offsets_ns(rate, 1.0, "fixed")


def _queue(intended: np.ndarray, service_ns: int, stall: tuple[int, int] | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """A one-worker FIFO server by hand: (sent, done) per request."""
    sent, done = np.zeros_like(intended), np.zeros_like(intended)
    free = 0
    for i, t in enumerate(intended):
        start = max(int(t), free)
        if stall and stall[0] <= start < stall[1]:
            start = stall[1]
        sent[i], done[i] = max(int(t), free), start + service_ns
        free = int(done[i])
    return sent, done


def _rec(intended, sent, done, window_ns, in_system=()) -> Recording:
    n = intended.shape[0]
    return Recording(intended, sent, done, np.full(n, OK, np.int8), np.ones(n, bool),
                     np.ones(n), window_ns, np.asarray(in_system, np.int64), 0.0)


def test_corrected_p99_equals_the_hand_computed_correction():
    intended = schedule_offsets_ns(500.0, 4.0, "poisson", seed=1)
    sent, done = _queue(intended, 1_500_000, stall=(1_000_000_000, 1_100_000_000))
    row = summarise_point(_rec(intended, sent, done, 4_000_000_000), mode="open", closed=False,
                          max_lag_us=1e9, timeout_ms=1e6)
    for q, key in ((50.0, "p50_ms"), (99.0, "p99_ms"), (99.9, "p999_ms")):
        hand = hand_corrected_p(intended, done, q)
        assert row[key] == pytest.approx(hand, rel=2e-3), (key, row[key], hand)  # HDR: 3 digits
    # the uncorrected figure (from the actual send) hides the stall's queue
    hand_u = float(np.percentile((done - sent) / 1e6, 99, method="inverted_cdf"))
    assert row["p99_ms_uncorrected"] == pytest.approx(hand_u, rel=2e-3)
    assert row["p99_ms"] > 50 > row["p99_ms_uncorrected"]


def test_closed_loop_correction_is_hdr_record_corrected_value():
    lat_us = np.array([1000] * 990 + [100_000] * 10)
    plain = percentiles_ms(histogram(lat_us))
    corr = percentiles_ms(histogram(lat_us, expected_interval_us=1000))
    assert plain["p99_ms"] == pytest.approx(1.0, rel=2e-3)
    # each 100 ms sample back-fills 99 ms, 98 ms, ... 1 ms: p99 rises far above 1 ms
    assert corr["p99_ms"] > 50
    assert corr["max_ms"] == pytest.approx(100.0, rel=2e-3)


def test_littles_law_from_samples_and_timestamps():
    intended = np.arange(1000, dtype=np.int64) * 10_000_000  # 100/s for 10 s
    done = intended + 20_000_000  # W = 20 ms
    ll = summarise_point(_rec(intended, intended, done, 10_000_000_000, in_system=[2] * 50),
                         mode="open", closed=False, max_lag_us=1e9,
                         timeout_ms=1e6)["littles_law"]
    assert ll["lambda_W"] == pytest.approx(2.0) and ll["ratio"] == pytest.approx(1.0)


def test_meets_slo_checks_p99_recall_errors_and_health():
    ok = {"p99_ms": 9.0, "recall": 0.95, "n": 1000, "errors": 0, "timeouts": 1,
          "generator_ok": True, "partial": False}
    assert meets_slo(ok, 10.0, 0.9, 0.001)
    assert not meets_slo({**ok, "p99_ms": 10.5}, 10.0, 0.9, 0.001)
    assert not meets_slo({**ok, "recall": 0.85}, 10.0, 0.9, 0.001)
    assert not meets_slo({**ok, "timeouts": 5}, 10.0, 0.9, 0.001)
    assert not meets_slo({**ok, "generator_ok": False}, 10.0, 0.9, 0.001)
    assert not meets_slo({**ok, "partial": True}, 10.0, None, 0.001)


def _measure(capacity: float, **extra):
    seen: list[float] = []

    def measure(rate: float) -> dict:
        seen.append(rate)
        return {"offered_qps": rate, "p99_ms": 5.0 if rate <= capacity else 50.0,
                "generator_ok": True, "partial": False, **extra}

    return measure, seen


def test_capacity_search_grows_then_bisects():
    measure, seen = _measure(730.0)
    res = search_capacity(measure, lambda r: r["p99_ms"] <= 10, start_qps=100, max_qps=1e5,
                          growth=2.0, steps=12, rel_tol=0.05)
    assert seen[:4] == [100, 200, 400, 800]
    assert res.limited_by == "slo" and res.capacity_qps <= 730 < res.first_fail_qps
    assert res.first_fail_qps / res.capacity_qps <= 1.05
    assert len(seen) < 12  # stopped by the tolerance, not the budget
    assert [r["meets_slo"] for r in res.rows] == [s <= 730 for s in seen]


def test_capacity_search_edges():
    measure, _ = _measure(10.0)
    res = search_capacity(measure, lambda r: r["p99_ms"] <= 10, start_qps=100, max_qps=1000)
    assert res.capacity_qps is None and res.first_fail_qps == 100
    measure, _ = _measure(1e9)
    res = search_capacity(measure, lambda r: r["p99_ms"] <= 10, start_qps=100, max_qps=500)
    assert res.capacity_qps == 500 and res.limited_by == "max_qps"
    measure, seen = _measure(1e9, generator_ok=False)
    res = search_capacity(measure, lambda r: True, start_qps=100, max_qps=500)
    assert res.limited_by == "generator" and res.capacity_qps is None and len(seen) == 1
    with pytest.raises(ValueError, match="start_qps"):
        search_capacity(measure, lambda r: True, start_qps=0, max_qps=500)
