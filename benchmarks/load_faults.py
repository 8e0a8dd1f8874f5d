"""The load harness against the fault-injecting backend (retrieval/testing/faulty.py): a 100 ms
stall once per second is seen by the corrected open-loop p99 and hidden by the uncorrected
closed-loop p99; with a fixed service time s and one server worker, achieved QPS tracks offered
QPS up to ~1/s, queueing takes over beyond it, and Little's law (L = lambda * W, L sampled live)
holds at the stable points. Each point runs a few seconds of real time.

Wall-clock physics (queueing bounds, achieved rates): a benchmark, not a test (a loaded machine
moves every figure). Usage: python benchmarks/load_faults.py (runs these checks with pytest;
exit 0 when they all hold). The drivers' schedule logic is tested deterministically in
tests/bench/test_load_schedule.py and tests/bench/test_load_logic.py."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from retrieval.bench.load.run import run_load_bench
from retrieval.bench.load.spec import parse_load_spec

DATASET = {"kind": "synthetic", "n": 500, "n_queries": 40, "dim": 16, "metric": "l2", "seed": 3}


def _spec(build: dict[str, Any], **over: Any) -> Any:
    data = {"name": "fault", "dataset": DATASET, "k": 5, "warmup_s": 0.3,
            "max_lag_us": 50_000.0,  # a contended CI machine: health is not what is tested
            "timeout_ms": 10_000.0, "configs": [{"backend": "fault", "build": build}], **over}
    return parse_load_spec(data)


def _points(result: Any) -> list[dict[str, Any]]:
    (cfg,) = result.summary["configs"]
    return cfg["points"]


def test_stall_is_seen_by_corrected_p99_and_hidden_by_closed_loop():
    spec = _spec({"service_ms": 4.0, "stall_ms": 100.0, "stall_every_s": 1.0, "workers": 1},
                 duration_s=3.3, closed={"clients": [1]},
                 # Poisson arrivals at ~0.93 of the capacity left by the stalls (simulated over
                 # 200 schedules: p99 >= 100.6 ms in every one; jitter only adds)
                 open={"arrival": "poisson", "clients": 8, "rates": [210.0], "search": None})
    closed, opened = _points(run_load_bench(spec))
    assert closed["mode"] == "closed" and opened["mode"] == "open"
    # the closed loop waits politely through each stall: one slow answer in ~200 per second
    assert closed["p99_ms_uncorrected"] < 30.0, closed
    assert closed["max_ms_uncorrected"] >= 90.0, closed  # the stall happened
    # the open loop keeps sending on schedule: every query due during a stall waits for it
    assert opened["p99_ms"] >= 100.0, opened
    assert opened["p99_ms"] > 3 * closed["p99_ms_uncorrected"]
    assert opened["p99_ms_uncorrected"] <= opened["p99_ms"]
    assert opened["errors"] == 0 and opened["recall"] == pytest.approx(1.0)


def test_fixed_service_time_one_worker_tracks_then_queues_littles_law():
    s_ms = 10.0  # capacity 1/s = 100 QPS
    spec = _spec({"service_ms": s_ms, "workers": 1}, duration_s=2.3, closed=None,
                 open={"arrival": "fixed", "clients": 4, "rates": [20.0, 50.0, 150.0],
                       "search": None})
    low, mid, over = _points(run_load_bench(spec))
    for p in (low, mid):  # below capacity: achieved = offered, no queueing, Little's law
        assert p["achieved_qps"] == pytest.approx(p["offered_qps"], rel=0.1), p
        assert p["p50_ms"] < 2 * s_ms, p
        ll = p["littles_law"]
        assert ll["ratio"] == pytest.approx(1.0, abs=0.2), ll
        # L = lambda * W with W ~ s: about offered * s queries in the system
        assert ll["L_sampled"] == pytest.approx(p["offered_qps"] * s_ms / 1000, rel=0.35), ll
    # beyond capacity: achieved is capped near 1/s and the queue grows (latency >> s)
    assert over["achieved_qps"] <= 1.1 * 1000 / s_ms, over
    assert over["achieved_qps"] >= 0.6 * 1000 / s_ms, over
    assert over["mean_ms"] > 10 * s_ms, over
    assert over["littles_law"]["L_sampled"] > 5 * mid["littles_law"]["L_sampled"], over
    assert over["p99_ms_uncorrected"] < over["p99_ms"] / 5, over  # the wait is client-side


def test_capacity_search_brackets_the_slo():
    # s = 20 ms, one worker: capacity 1/s = 50 QPS; p99 <= 200 ms holds below it (even with a
    # contended machine's hiccups) and fails beyond it, where the queue grows every second
    spec = _spec({"service_ms": 20.0, "workers": 1}, duration_s=1.3, closed=None,
                 open={"arrival": "fixed", "clients": 4,
                       "search": {"start_qps": 5, "max_qps": 800, "steps": 7,
                                  "rel_tol": 0.2}},
                 slo={"p99_ms": 200.0, "target_recall": 0.99})
    result = run_load_bench(spec)
    (cfg,) = result.summary["configs"]
    steps = [p["offered_qps"] for p in cfg["points"]]
    assert steps[:4] == [5.0, 10.0, 20.0, 40.0], steps  # grown geometrically, then bisected
    assert cfg["limited_by"] == "slo", cfg
    assert cfg["capacity_qps"] is not None and 20 <= cfg["capacity_qps"] <= 62.5, cfg
    assert cfg["first_fail_qps"] > cfg["capacity_qps"]
    passing = [p for p in cfg["points"] if p["meets_slo"]]
    assert max(p["offered_qps"] for p in passing) == cfg["capacity_qps"]
    assert len(steps) < 7 or cfg["first_fail_qps"] / cfg["capacity_qps"] <= 1.2


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", "--rootdir", "benchmarks"]))
