"""Target search on a monotone knob: the smallest value in ``[low, high]`` whose recall meets the
target, by galloping + bisection, reusing every known measurement.

Pure functions over ``known`` (knob value -> meets the target?), so a search can be resumed
from whatever was already measured and no value is ever measured twice.

The order of evaluations:

1. ``high`` (the most accurate setting in range): if it misses, the build is infeasible after
   one evaluation;
2. galloping from ``low`` (``low, low+1, low+3, low+7, ...``) while a worst-case check shows the
   total stays within the budget: an easy target costs two evaluations;
3. bisection of the interval between the largest miss and the smallest hit.

Budget: at most ``ceil(log2(high - low + 1)) + 2`` evaluations per search (proved by the
invariant ``used + ceil(log2(open interval)) <= budget``, which every step keeps).
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
    i = 0  # galloping offsets 2**i - 1: low, low+1, low+3, low+7, ...
    while low + (1 << i) - 1 <= b.fail:
        i += 1
    gallop = low + (1 << i) - 1
    if gallop < b.ok:
        worst = max(clog2(b.ok - gallop), clog2(gallop - b.fail))
        if b.used + 1 + worst <= budget(low, high):
            return gallop
    return b.fail + b.width // 2


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
