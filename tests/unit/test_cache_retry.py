"""Bounded retry of Redis calls (retrieval.cache.redis.retry_transient) and the one-line loss
message of `rwb tune cache`; the real outage is in tests/integration/test_cache_tune_outage.py."""

from __future__ import annotations

import time

import pytest

from retrieval.cache.redis import RedisLost, lost_or_none, retry_transient


def _flaky(failures: int, exc: Exception) -> tuple[list[int], object]:
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise exc
        return "ok"

    return calls, fn


def test_outage_retried_with_backoff_then_succeeds() -> None:
    calls, fn = _flaky(2, ConnectionRefusedError("refused"))
    t0 = time.perf_counter()
    assert retry_transient(fn, retries=3, backoff_s=0.02) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 3
    assert time.perf_counter() - t0 >= 0.02 + 0.04  # 0.02, then doubled


def test_retries_spent_raise_the_last_error_and_other_errors_pass_at_once() -> None:
    calls, fn = _flaky(10, ConnectionResetError("reset"))
    with pytest.raises(ConnectionResetError):
        retry_transient(fn, retries=2, backoff_s=0.001)  # type: ignore[arg-type]
    assert len(calls) == 3
    calls, fn = _flaky(10, ValueError("not an outage"))
    with pytest.raises(ValueError):
        retry_transient(fn, retries=5, backoff_s=0.001)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_lost_or_none_names_the_phase() -> None:
    lost = lost_or_none(TimeoutError("timed out"), "redis://127.0.0.1:1", "the fill")
    assert isinstance(lost, RedisLost)
    assert str(lost) == "Redis at redis://127.0.0.1:1 went away during the fill"
    gone = lost_or_none(RuntimeError("Unknown index name"), "redis://h:2", "the KNN fetch")
    assert str(gone) == "Redis at redis://h:2 restarted (the index vanished) during the KNN fetch"
    assert lost_or_none(ValueError("bad"), "redis://h:2", "x") is None
