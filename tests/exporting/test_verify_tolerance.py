"""How far `rwb verify` lets a recorded figure sit from its re-measurement: exact for a seeded
one-thread build, else 4 standard errors of the mean recall with a floor of 0.05 (a looser floor
would let an edited recall through)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from retrieval.exporting.verify import evidence_checks


@dataclass(frozen=True)
class _Now:
    recall: float
    recall_lb: float
    n_queries: int


def _check(recorded: float, now: float, n: int, threads: int) -> dict:
    (c, _lb) = evidence_checks({"recall": recorded, "recall_lower_bound": now - 0.01},
                               _Now(now, now - 0.01, n), None, "hnswlib", 10, threads)
    assert c["check"] == "evidence.recall"
    return c


@pytest.mark.parametrize(("recorded", "passed"), [
    (0.90, True), (0.86, True), (0.951, False), (0.83, False), (0.75, False), (0.70, False)])
def test_rebuild_tolerance_floor_is_005(recorded: float, passed: bool) -> None:
    """2000 queries at recall 0.9: 4 standard errors are 0.027, so the 0.05 floor decides;
    0.07 or more away fails (it would pass with a floor of 0.08 or 0.15)."""
    assert 4 * math.sqrt(0.9 * 0.1 / 2000) < 0.03
    c = _check(recorded, 0.90, 2000, threads=2)
    assert c["passed"] is passed, c
    assert c["fields"] == ([] if passed else ["evidence.recall"])
    assert "within 0.05," in c["expected"]


def test_few_queries_widen_the_tolerance_to_four_standard_errors() -> None:
    """40 queries at recall 0.5: 4 * sqrt(0.25 / 40) = 0.316."""
    assert _check(0.25, 0.5, 40, threads=2)["passed"] is True
    assert _check(0.15, 0.5, 40, threads=2)["passed"] is False
    assert "within 0.32," in _check(0.25, 0.5, 40, threads=2)["expected"]


def test_a_seeded_one_thread_build_must_reproduce_exactly() -> None:
    assert _check(0.9, 0.9, 2000, threads=1)["passed"] is True
    assert _check(0.899, 0.9, 2000, threads=1)["passed"] is False
