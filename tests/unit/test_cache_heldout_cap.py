"""Issue 34 new user 9: ``heldout_meets_cap`` is judged on the held-out upper bound (the rule
the threshold was chosen by), never true while that bound is over the cap."""

from __future__ import annotations

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
