"""A per-query policy judged against fixed levels of one knob whose per-query quality and cost
are known (pure numpy): the rerank router (dense + rerank at a depth, or BM25 with no rerank,
per query) against every fixed rerank depth. The tuned fixed level is the one with the lowest
mean cost whose mean AND 5th-percentile per-query quality reach the policy's (ties: the
smaller level); it wins a tie in cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.adaptive.policy import meets, quality


def judge_levels(policy: str, q: np.ndarray, cost: np.ndarray, ms: np.ndarray | None,
                 levels: Mapping[int, tuple[np.ndarray, np.ndarray]], *, knob: str,
                 cost_unit: str, level_ms: Mapping[int, float | None] | None = None,
                 meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``adaptive`` entry of a policy with per-query quality ``q`` and cost ``cost`` (and
    ms) against ``levels`` (knob value -> per-query quality, per-query cost on the same
    queries)."""
    mean, p5 = quality(q)
    pcost = float(np.mean(cost))
    ok = [(float(np.mean(c)), v) for v, (lq, c) in levels.items() if meets(lq, mean, p5)]
    entry: dict[str, Any] = {**(meta or {}), "policy": policy, "cost_unit": cost_unit,
                             "cost": pcost, "mean": mean, "p5": p5, "n_queries": int(q.size),
                             "p50_ms": None if ms is None else float(np.percentile(ms, 50))}
    searched = [min(levels), max(levels)] if levels else []
    if not ok:
        entry["vs_fixed"] = {"knob": knob, "value": None, "searched": searched, "cost": None,
                             "ratio": None, "winner": "policy",
                             "verdict": f"no fixed {knob} in {searched} reaches the policy's "
                                        f"mean {mean:.4f} and p5 {p5:.4f}: {policy} wins"}
        return entry
    fcost, value = min(ok)
    fm, fp = quality(levels[value][0])
    ratio = pcost / fcost if fcost > 0 else (None if pcost > 0 else 1.0)
    wins = pcost < fcost
    head = f"{policy} wins" if wins else "the tuned fixed setting wins"
    entry["vs_fixed"] = {
        "knob": knob, "value": value, "searched": searched, "cost": fcost, "mean": fm, "p5": fp,
        "p50_ms": (level_ms or {}).get(value), "ratio": ratio,
        "winner": "policy" if wins else "fixed",
        "verdict": f"{head}: fixed {knob}={value} reaches mean {fm:.4f} / p5 {fp:.4f} at "
                   f"{fcost:.1f} {cost_unit} per query; {policy} costs {pcost:.1f} for mean "
                   f"{mean:.4f} / p5 {p5:.4f}"}
    return entry
