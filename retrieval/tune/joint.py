"""Two monotone knobs solved jointly: a search knob ``a`` (ef / nprobe, an integer range) and a
rescoring knob ``b`` (oversampling / refine ``k_factor``, a ladder of values), both with recall
non-decreasing. The minimal feasible pairs form a staircase: ``a*(b)``, the smallest ``a``
meeting the target at ``b``, is non-increasing in ``b``. The cheapest pair (cost grows with both
knobs) is one of the staircase's steps, so only the steps are searched:

for each ``b`` up the ladder, :func:`retrieval.tune.target.next_probe` over ``[low, a*(previous
b)]`` (the previous step is known to meet, hence meets here: it is inferred, not measured);
stop once ``a*(b) == low`` (a larger ``b`` only costs more). Monotonicity also infers a hit at
``(a, b)`` from a hit at ``(a' <= a, b' <= b)`` and a miss from a miss at ``(a' >= a, b' >= b)``.

Evaluations: at most ``sum over ladder of budget(low, a*(previous))``; in practice the first
step costs one target search and each later step a few bisections of a narrowing range, against
``len(range) x len(ladder)`` for a grid (``benchmarks/memory.py`` prints both).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from retrieval.tune import target as tgt

Pair = tuple[int, int]


def _inferred(b: int, known: Mapping[Pair, bool]) -> dict[int, bool]:
    """What ``known`` says about knob ``a`` at rescoring value ``b`` (measured or implied)."""
    out: dict[int, bool] = {}
    for (a2, b2), ok in known.items():
        if ok and b2 <= b:
            out[a2] = True  # (noisy measurements could contradict: a hit wins)
        elif not ok and b2 >= b:
            out.setdefault(a2, False)
    return out


def steps(low: int, high: int, ladder: Sequence[int],
          known: Mapping[Pair, bool]) -> tuple[list[tuple[int, int | None]], Pair | None]:
    """The staircase as far as ``known`` determines it (``(b, a*(b))``, None when infeasible at
    ``b``) and the next pair to measure (None when the search is over)."""
    top = high
    out: list[tuple[int, int | None]] = []
    for b in ladder:
        at_b = _inferred(b, known)
        probe = tgt.next_probe(low, top, at_b)
        if probe is not None:
            return out, (probe, b)
        a_star = tgt.answer(low, top, at_b)
        out.append((b, a_star))
        if a_star is not None:
            if a_star <= low:
                break
            top = a_star
    return out, None


def next_pair(low: int, high: int, ladder: Sequence[int],
              known: Mapping[Pair, bool]) -> Pair | None:
    """The next (a, b) to measure, or None when the staircase is complete."""
    return steps(low, high, ladder, known)[1]


@dataclass(frozen=True)
class Outcome:
    """The staircase ``(b, a*(b))``, the cheapest feasible pair under ``cost`` and the pairs
    measured, in order."""

    staircase: tuple[tuple[int, int | None], ...]
    best: Pair | None
    evaluations: int
    probes: tuple[Pair, ...]


def solve(low: int, high: int, ladder: Sequence[int], meets: Callable[[int, int], bool],
          cost: Callable[[int, int], float]) -> Outcome:
    """Run the joint search with ``meets(a, b)`` as oracle; ``best`` minimises ``cost`` over
    the staircase's feasible steps."""
    known: dict[Pair, bool] = {}
    probes: list[Pair] = []
    while (p := next_pair(low, high, ladder, known)) is not None:
        known[p] = bool(meets(*p))
        probes.append(p)
    stair, _ = steps(low, high, ladder, known)
    feasible = [(a, b) for b, a in stair if a is not None]
    best = min(feasible, key=lambda ab: cost(*ab), default=None)
    return Outcome(tuple(stair), best, len(probes), tuple(probes))


def grid_best(values_a: Sequence[int], ladder: Sequence[int], meets: Callable[[int, int], bool],
              cost: Callable[[int, int], float]) -> tuple[Pair | None, int]:
    """The cheapest feasible pair of a full grid and its number of evaluations (the baseline)."""
    ok = [(a, b) for a in values_a for b in ladder if meets(a, b)]
    return min(ok, key=lambda ab: cost(*ab), default=None), len(values_a) * len(ladder)
