"""Issue 34 new user 9: ``heldout_meets_cap`` is judged on the held-out upper bound (the rule
the threshold was chosen by), never true while that bound is over the cap."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.cache.run import heldout_meets_cap


@pytest.mark.parametrize(("upper_bound", "cap", "expected"), [
    (0.0519, 0.05, False),  # the new user's run: rate under the cap, bound over it
    (0.05, 0.05, True),     # at the cap
    (0.031, 0.05, True),
    (None, 0.05, False),    # no held-out probes: nothing shown
])
def test_heldout_meets_cap_is_the_upper_bound_at_or_under_the_cap(upper_bound, cap,
                                                                  expected) -> None:
    assert heldout_meets_cap(upper_bound, cap) is expected


class _Design:
    def __init__(self, heldout: np.ndarray, positive: np.ndarray) -> None:
        self.heldout, self.positive = heldout, positive
        self.info: dict[str, object] = {}


def test_the_summary_says_no_while_the_heldout_rate_is_under_the_cap_and_its_bound_over() -> None:
    """A small held-out split (4% of 4,000 probes): its false-hit RATE is under the cap but its
    upper bound is not; the summary's heldout_meets_cap follows the bound."""
    from retrieval.cache.run import summarise
    from retrieval.cache.spec import parse_cache_spec
    from retrieval.cache.tune import choose_threshold

    rng = np.random.default_rng(0)
    n = 4000
    positive = rng.random(n) < 0.4
    dist = np.where(positive, rng.uniform(0.0, 0.3, n), rng.uniform(0.1, 0.6, n))
    correct = positive & (rng.random(n) < 0.9)
    heldout = rng.random(n) < 0.04
    spec = parse_cache_spec({"tuning": {"max_false_hit": 0.05, "grid_step": 0.001,
                                        "curve_step": 0.05}})
    design = _Design(heldout, positive)
    res = choose_threshold(dist, correct, design, spec)  # type: ignore[arg-type]
    s = summarise(spec, res, design, {}, {}, {}, {})  # type: ignore[arg-type]
    assert s.heldout_false_hit_rate is not None and s.heldout_false_hit_rate <= 0.05
    assert s.heldout_false_hit_upper_bound is not None and s.heldout_false_hit_upper_bound > 0.05
    assert s.heldout_meets_cap is False
