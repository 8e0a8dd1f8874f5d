"""Issue 34 new user 8 (churn part): the churn advice for an engine that needs maintenance
(pgvector's VACUUM) is judged before it too: the pre-maintenance lower bound and the share of
queries that got fewer than k rows are reported, and "holds" only when both hold."""

from __future__ import annotations

from typing import Any

from retrieval.churn.logic import AdviceInput, advice_dict
from retrieval.churn.run import _before_maintain


def _adv(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "target": 0.95, "knob": "ef_search", "value": 80, "knob_max": 1280, "recall": 0.99,
        "lower": 0.97, "tuned": 80, "searched": True, "control_lower": 0.97,
        "control_tuned": 80, "damage": 0.0, "damage_points": 1.0, "maintain": None}
    return advice_dict(AdviceInput(**{**base, **kw}))


def test_holds_after_vacuum_but_not_before_is_not_holds() -> None:
    """The new user's pgvector run: lower bound 0.938 and 15.8% short before VACUUM."""
    adv = _adv(before_maintain=(5, 0.938, 0.158))
    assert adv["action"] == "maintain" and not adv["line"].startswith("holds:")
    assert "lower bound 0.938 vs 0.95" in adv["line"] and "15.8% of queries" in adv["line"]
    assert adv["before_maintain"] == {"step": 5, "recall_lower": 0.938, "short_queries": 0.158}


def test_each_of_the_two_alone_breaks_holds() -> None:
    assert _adv(before_maintain=(5, 0.96, 0.02))["action"] == "maintain"  # short of k only
    assert _adv(before_maintain=(5, 0.94, 0.0))["action"] == "maintain"   # bound only


def test_holds_when_both_hold_before_the_maintenance_and_after() -> None:
    adv = _adv(before_maintain=(5, 0.96, 0.0))
    assert adv["action"] == "hold" and adv["line"].startswith("holds:")
    assert adv["before_maintain"]["recall_lower"] == 0.96
    assert "before_maintain" not in _adv()  # a runbook without maintenance


def _rec(step: int, op: str, lower: float = 0.9, short: float = 0.0) -> dict[str, Any]:
    return {"step": step, "op": op, "recall_lower": lower, "short_queries": short}


def test_the_step_judged_is_the_last_search_before_the_last_maintenance() -> None:
    recs = [_rec(0, "search", 0.99), _rec(1, "delete"), _rec(2, "search", 0.94, 0.1),
            _rec(3, "delete"), _rec(4, "search", 0.93, 0.16), _rec(5, "maintain"),
            _rec(6, "search", 0.97)]
    assert _before_maintain(recs) == (4, 0.93, 0.16)
    assert _before_maintain(recs[:5]) is None            # no maintenance
    assert _before_maintain(recs[:6]) is None            # no search after it
    assert _before_maintain([_rec(0, "maintain"), _rec(1, "search")]) is None  # none before
