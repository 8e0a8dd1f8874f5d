"""Issue 34 hostile 9: churn damage judged against the spread of two fresh control builds (an
IVF k-means seed alone moved recall 0.882 <-> 0.975, once reported as 9.9 points of damage)."""

from __future__ import annotations

import pytest

from retrieval.churn.logic import judged_damage


def test_damage_inside_the_control_spread_is_none() -> None:
    # the reported case: 9.3 points between the live index and its control, while two fresh
    # builds of the same data differ by 9.3 points too
    assert judged_damage(0.975 - 0.882, 0.975 - 0.882) == (0.0, True)
    assert judged_damage(-0.04, 0.05) == (0.0, True)  # the index beat its control: noise too


def test_damage_beyond_the_spread_stands() -> None:
    reported, within = judged_damage(0.099, 0.02)
    assert within is False and reported == pytest.approx(0.099)


def test_without_a_control_or_a_spread() -> None:
    assert judged_damage(None, 0.1) == (None, None)
    reported, within = judged_damage(0.05, None)  # no second build: the damage stands
    assert within is False and reported == pytest.approx(0.05)
