"""The joint two-knob search (ef/nprobe x oversampling/k_factor) finds the grid's cheapest pair
with fewer evaluations (issue 23 item 3)."""

from __future__ import annotations

import itertools

import pytest

from retrieval.tune import joint

LADDER = (1, 2, 4, 8, 16)


def _staircase(thresholds: dict[int, int]):  # type: ignore[no-untyped-def]
    """meets(a, b) iff a >= thresholds[b] (thresholds non-increasing in b: monotone)."""
    return lambda a, b: a >= thresholds[b]


@pytest.mark.parametrize("seed", range(40))
def test_same_cheapest_pair_as_the_grid_in_fewer_evaluations(seed: int) -> None:
    import random

    rng = random.Random(seed)
    low, high = 1, 256
    t = sorted((rng.randint(1, 300) for _ in LADDER), reverse=True)  # > 256: infeasible
    thresholds = dict(zip(LADDER, t))
    meets = _staircase(thresholds)
    wa, wb = rng.uniform(0.5, 2.0), rng.uniform(1.0, 40.0)

    def cost(a: int, b: int) -> float:
        return wa * a + wb * b

    out = joint.solve(low, high, LADDER, meets, cost)
    best, grid_n = joint.grid_best(range(low, high + 1), LADDER, meets, cost)
    assert out.best == best
    assert len(set(out.probes)) == out.evaluations  # never the same pair twice
    assert out.evaluations * 3 <= grid_n
    assert out.evaluations <= sum(2 + 9 for _ in LADDER)  # budget(1, 256) = 10 per step


def test_infeasible_everywhere_and_knob_floor() -> None:
    never = joint.solve(1, 64, LADDER, lambda a, b: False, lambda a, b: a + b)
    assert never.best is None and all(a is None for _, a in never.staircase)
    assert never.evaluations == len(LADDER)  # one probe at the top per ladder value
    always = joint.solve(1, 64, LADDER, lambda a, b: True, lambda a, b: a + b)
    assert always.best == (1, 1) and len(always.staircase) == 1  # a*(1) == low: stop


def test_monotonicity_is_used_to_infer() -> None:
    known = {(8, 1): True, (4, 2): False}
    # a hit at (8, 1) implies a hit at (8, 2); the miss at (4, 2) implies a miss at (4, 1)
    assert joint._inferred(2, known) == {8: True, 4: False}
    assert joint._inferred(1, known) == {8: True, 4: False}
    assert all(p not in known for p in itertools.islice(
        iter([joint.next_pair(1, 64, LADDER, known)]), 1))
