"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def _assert_rule_depth(s: dict[str, Any]) -> None:
    """``chosen_depth`` is the smallest depth whose tuning-split selection metric is within
    ``tolerance`` of the best depth's (recomputed from the curve)."""
    metric = s["selection_metric"]
    tuning = {c["depth"]: c["tuning"][metric] for c in s["curve"]}
    best = max(tuning.values())
    rule = min(d for d, v in tuning.items() if v >= best - s["tolerance"] - 1e-12)
    assert s["chosen_depth"] == rule, (tuning, s["tolerance"])
    assert s["best_depth"] == max(tuning, key=lambda d: (tuning[d], -d))


@pytest.fixture
def assert_rule_depth() -> Callable[[dict[str, Any]], None]:
    """The rerank tuner's depth rule, recomputed from a run summary (rerank tests)."""
    return _assert_rule_depth
