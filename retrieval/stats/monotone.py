"""Target search on a monotone knob: the smallest value in ``[low, high]`` that meets a target
(a recall target, a quality test), by galloping + bisection, reusing every known measurement.
``retrieval.tune.target`` re-exports it.

Pure functions over ``known`` (knob value -> meets the target?), so a search can be resumed
from whatever was already measured and no value is ever measured twice.

The order of evaluations:

1. ``high`` (the most accurate setting in range): if it misses, the build is infeasible after
   one evaluation;
2. galloping *down* while the bracket ``(largest miss, smallest hit]`` is wide (its top more than
   twice its bottom): the next value is a quarter of the way up the bracket, so hits shrink it
   fourfold and the probes stay cheap (recall targets usually sit low in a knob's range, and a
   probe's cost grows with the knob);
3. bisection once the bracket is narrow.

Budget: at most ``ceil(log2(high - low + 1)) + 2`` evaluations per search. Every probe is
clamped into the window that keeps the invariant ``used + ceil(log2(bracket)) <= budget``
whichever way it falls, so the budget holds for any answer (tested exhaustively).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


def clog2(n: int) -> int:
    """ceil(log2(n)) for n >= 1 (0 for n <= 1)."""
    return 0 if n <= 1 else (n - 1).bit_length()


def budget(low: int, high: int) -> int:
    """Most evaluations a search over ``[low, high]`` may take."""
    return clog2(high - low + 1) + 2


@dataclass(frozen=True)
class Bracket:
    """What ``known`` says about ``[low, high]``: the smallest hit ``ok`` and the largest miss
    below it ``fail`` (``low - 1`` when none); the answer lies in ``(fail, ok]``."""

    ok: int | None
    fail: int
    used: int

    @property
    def width(self) -> int:
        return 0 if self.ok is None else self.ok - self.fail


def bracket(low: int, high: int, known: Mapping[int, bool]) -> Bracket:
    inside = {v: m for v, m in known.items() if low <= v <= high}
    hits = [v for v, m in inside.items() if m]
    ok = min(hits) if hits else None
    misses = [v for v, m in inside.items() if not m and (ok is None or v < ok)]
    return Bracket(ok, max(misses, default=low - 1), len(inside))


def next_probe(low: int, high: int, known: Mapping[int, bool]) -> int | None:
    """The next knob value to measure, or None when the search is over."""
    if low > high:
        return None
    if high not in known:
        return high
    if not known[high]:
        return None  # the most accurate setting misses: infeasible
    b = bracket(low, high, known)
    assert b.ok is not None
    if b.width <= 1:
        return None
    fail, ok = b.fail, b.ok
    left = budget(low, high) - b.used  # evaluations still allowed (>= clog2(width) >= 1)
    half = 1 << max(left - 1, 0)
    lo_w, hi_w = max(fail + 1, ok - half), min(ok - 1, fail + half)
    if lo_w > hi_w:  # only when known holds values off the search path: plain bisection
        return fail + b.width // 2
    wide = ok > 2 * max(fail, 1)
    # wide: gallop down, a quarter of the way up the bracket; narrow: bisect
    want = fail + (max(1, b.width // 4) if wide else b.width // 2)
    return min(max(want, lo_w), hi_w)


def answer(low: int, high: int, known: Mapping[int, bool]) -> int | None:
    """The smallest value meeting the target once the search is over; None if infeasible (or
    not yet determined)."""
    if high not in known or not known[high]:
        return None
    b = bracket(low, high, known)
    return b.ok if b.width <= 1 else None


@dataclass(frozen=True)
class Outcome:
    value: int | None
    evaluations: int
    probes: tuple[int, ...]


def solve(
    low: int,
    high: int,
    meets: Callable[[int], bool],
    known: Mapping[int, bool] | None = None,
) -> Outcome:
    """Run a whole search with ``meets`` as the oracle (values in ``known`` cost nothing)."""
    seen = dict(known or {})
    probes = []
    while (v := next_probe(low, high, seen)) is not None:
        seen[v] = bool(meets(v))
        probes.append(v)
    return Outcome(answer(low, high, seen), len(probes), tuple(probes))
