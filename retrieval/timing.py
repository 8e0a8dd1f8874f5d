"""THE timer: every timed path in rwb (index searches, model calls, cache lookups, fusion) uses it.

Rules, as ann-benchmarks and faiss's benchmarks keep them: warm up first (untimed); the garbage
collector is paused while timing (a collection inside one query is noise, not the system under
test); the clock is ``time.perf_counter_ns``; only the call under test sits between the two clock
reads (argument slicing and result conversion happen outside). Times come back in **milliseconds**
as float64 arrays.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")
R = TypeVar("R")

clock_ns = time.perf_counter_ns
NS_PER_MS = 1e6


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the garbage collector for the block (restored to its previous state after)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def warm_up(call: Callable[[T], Any], items: Sequence[T], n: int) -> None:
    """Call ``call`` on the first ``n`` items, untimed (caches, lazy init, branch predictors)."""
    for item in items[: max(0, n)]:
        call(item)


def time_each(
    call: Callable[[T], R], items: Sequence[T], *, warmup: int = 0
) -> tuple[list[R], np.ndarray]:
    """``call(item)`` for every item, each timed alone: (results, per-call ms, float64)."""
    warm_up(call, items, warmup)
    n = len(items)
    out: list[Any] = [None] * n
    lat = np.empty(n, dtype=np.int64)
    clock = clock_ns
    with gc_paused():
        for i, item in enumerate(items):
            t0 = clock()
            out[i] = call(item)
            lat[i] = clock() - t0
    return out, lat / NS_PER_MS


def time_repeat(
    call: Callable[[], R], repeats: int, *, warmup: int = 0
) -> tuple[R, np.ndarray]:
    """``call()`` ``repeats`` times (>= 1): (the last result, per-call ms, float64)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1; received {repeats}")
    for _ in range(max(0, warmup)):
        call()
    times = np.empty(repeats, dtype=np.int64)
    clock = clock_ns
    res: Any = None
    with gc_paused():
        for i in range(repeats):
            t0 = clock()
            res = call()
            times[i] = clock() - t0
    return res, times / NS_PER_MS


@dataclass
class Stopwatch:
    """Elapsed time of a ``with timed():`` block; ``ms`` / ``s`` are set when the block ends."""

    ns: int = 0

    @property
    def ms(self) -> float:
        return self.ns / NS_PER_MS

    @property
    def s(self) -> float:
        return self.ns / 1e9


@contextmanager
def timed(*, pause_gc: bool = True) -> Iterator[Stopwatch]:
    """Time a block (a build, a fill, one batch): ``with timed() as sw: ...; sw.ms``."""
    sw = Stopwatch()
    ctx = gc_paused() if pause_gc else _nothing()
    with ctx:
        t0 = clock_ns()
        try:
            yield sw
        finally:
            sw.ns = clock_ns() - t0


@contextmanager
def _nothing() -> Iterator[None]:
    yield


__all__ = [
    "Stopwatch",
    "clock_ns",
    "gc_paused",
    "time_each",
    "time_repeat",
    "timed",
    "warm_up",
]
