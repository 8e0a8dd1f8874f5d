"""The load drivers stamp each request's intended send time from the schedule (start +
offset), never from when a client got round to sending it: with one client stalled on the first
request, the requests queued behind it keep their scheduled times, so their corrected latency
(done - intended) includes the wait. Every assertion is an exact equality or a lower bound that
a slower machine only makes larger (no timed upper bounds)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from retrieval.bench.load.drivers import (
    LoopOptions,
    Target,
    closed_loop_threads,
    open_loop_asyncio,
    open_loop_threads,
)
from retrieval.bench.load.stats import OK, schedule_offsets_ns
from retrieval.timing import clock_ns

STALL_S = 0.06  # the first request's call takes at least this long
N = 30
OFFSETS = schedule_offsets_ns(500.0, N / 500.0, "fixed")  # every 2 ms for 60 ms
OPT = LoopOptions(warmup_ns=0, duration_ns=int(OFFSETS[-1]) + 50_000_000,
                  timeout_ns=60_000_000_000)


def _target() -> Target:
    def call(qi: int) -> int:
        if qi == 0:
            time.sleep(STALL_S)
        return qi

    return Target("stall-first", N, call, lambda qi, raw: 1.0)


def _check_open(rec) -> None:
    assert rec.intended.shape == (N,) and (rec.status == OK).all()
    # the schedule itself, to the nanosecond
    assert np.array_equal(rec.intended - rec.intended[0], OFFSETS)
    # one client, stuck 60 ms in request 0: the requests scheduled meanwhile were sent after it
    # returned, and their latency counts from their scheduled time (coordinated omission)
    behind = np.flatnonzero(OFFSETS < STALL_S * 1e9 * 0.8)[1:]
    assert behind.size >= 20
    assert (rec.sent[behind] >= rec.done[0]).all()
    corrected = rec.done[behind] - rec.intended[behind]
    floor = rec.done[0] - rec.intended[behind]
    assert (corrected >= floor).all() and (floor >= 0.2 * STALL_S * 1e9).all()
    assert rec.done[0] - rec.sent[0] >= STALL_S * 1e9


def test_open_loop_threads_stamps_the_schedule() -> None:
    start = clock_ns() + 100_000_000
    rec = open_loop_threads(_target(), OFFSETS, 1, OPT, start_ns=start)
    assert np.array_equal(rec.intended, start + OFFSETS)
    _check_open(rec)


def test_open_loop_asyncio_stamps_the_schedule() -> None:
    _check_open(open_loop_asyncio(_target(), OFFSETS, 1, OPT))


def test_closed_loop_intended_is_the_send_time() -> None:
    """A closed loop has no schedule: a request is meant to go when it is sent."""
    opt = LoopOptions(warmup_ns=0, duration_ns=100_000_000, timeout_ns=60_000_000_000)
    rec = closed_loop_threads(_target(), 1, opt)
    assert rec.intended.size >= 1 and np.array_equal(rec.intended, rec.sent)
    assert (rec.done >= rec.sent).all()


@pytest.mark.parametrize("arrival", ["fixed", "poisson"])
def test_schedule_offsets_are_integer_ns_from_zero(arrival: str) -> None:
    off = schedule_offsets_ns(1000.0, 0.5, arrival, seed=3)  # type: ignore[arg-type]
    assert off.dtype == np.int64 and off[0] == 0 and (np.diff(off) >= 0).all()
    assert off[-1] < 500_000_000
    if arrival == "fixed":
        assert np.array_equal(off, np.arange(500, dtype=np.int64) * 1_000_000)
