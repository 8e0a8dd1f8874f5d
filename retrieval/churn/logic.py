"""Pure logic of the churn bench (numpy only; golden-tested): results short of k, the drift /
damage split, and the one-line advice per engine (a step's recall and its bound are THE
measurer's: :meth:`retrieval.tune.measure.Measurer.at_step`).

Drift vs damage, in recall points of the configured search params: the reference is the recall
at the run's first search step; the control is a fresh build on the live set at a later step.

- ``drift = reference - control``: what the data alone costs (a fresh index on the new data
  does that much worse or better);
- ``damage = control - recall``: what the writes cost the index itself (deleted nodes, graph
  links lost, stale clusters), so ``reference - recall = drift + damage``.

Both are fractions of recall in the JSON (0.021) and points in messages (2.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.stats.metrics import recall_fewer_than_k

#: per-query recall@k by id against the live set's exact top-k under the filtered sweep's
#: fewer-than-k rule (THE evaluation loop's, :func:`retrieval.stats.metrics.recall_fewer_than_k`)
live_recall = recall_fewer_than_k


def short_of_k(ids: np.ndarray, k: int, live: int) -> dict[str, float]:
    """Results returned short of k (pgvector #244's symptom): the share of queries with fewer
    than ``min(k, live)`` ids, and the mean number missing per query."""
    want = min(k, live)
    got = (np.asarray(ids)[:, :k] >= 0).sum(axis=1)
    miss = np.maximum(want - got, 0)
    return {"short_queries": float((miss > 0).mean()), "missing_per_query": float(miss.mean())}


def split(reference: float | None, control: float | None, recall: float
          ) -> tuple[float | None, float | None]:
    """(drift, damage) of a step (None without a control; drift None without a reference)."""
    if control is None:
        return None, None
    return (None if reference is None else reference - control), control - recall


def judged_damage(damage: float | None, spread: float | None
                  ) -> tuple[float | None, bool | None]:
    """(damage reported, within the spread) of a step: a damage (recall fraction) no larger in
    size than two fresh builds of the same data differ (``spread``) is no damage and reported as
    0.0; without a control (``damage`` None) both are None; without a spread it stands."""
    if damage is None:
        return None, None
    within = spread is not None and abs(damage) <= spread
    return (0.0 if within else damage), within


def percentiles_ms(ms: list[float] | np.ndarray) -> dict[str, float | None]:
    """p50/p95/p99 of per-call times (ms), None when there were no calls."""
    a = np.asarray(ms, dtype=np.float64)
    if a.size == 0:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {"p50_ms": float(p50), "p95_ms": float(p95), "p99_ms": float(p99)}


@dataclass(frozen=True)
class AdviceInput:
    """What the advice reads at the last search step of one config.

    ``knob`` / ``value``: the monotone search knob and its configured value (None for a backend
    without one); ``lower``: recall lower bound at ``value``; ``tuned``: the smallest knob
    value meeting the target on the churned index (None: none in ``[.., knob_max]``, or not
    searched); ``control_lower`` / ``control_tuned``: the same on a fresh build of the live
    set (None: no control); ``damage``: recall fraction; ``maintain``: (action, seconds,
    recall after it) of the clean-up probe, or None; ``before_maintain``: (step, recall lower
    bound, share of queries short of k) at the last search step before the runbook's last
    ``maintain`` step (pgvector: before ``VACUUM``), or None when the runbook has none."""

    target: float | None
    knob: str | None
    value: int | None
    knob_max: int | None
    recall: float
    lower: float
    tuned: int | None
    searched: bool
    control_lower: float | None
    control_tuned: int | None
    damage: float | None
    damage_points: float
    maintain: tuple[str, float, float] | None = None
    before_maintain: tuple[int, float, float] | None = None


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def advise(a: AdviceInput) -> tuple[str, str]:
    """(action, one line): ``hold`` / ``maintain`` / ``re-tune`` / ``rebuild`` / ``drift`` /
    ``report``, e.g. ``re-tune ef_search 80 -> 96 to hold 0.95``."""
    dmg = f"damage {_pts(a.damage)} points"
    if a.target is None:
        return "report", f"no target: recall {a.recall:.3f} at the last step ({dmg})"
    setting = f"{a.knob} {a.value}" if a.knob else "its search params"
    if a.lower >= a.target and a.before_maintain is not None:
        step, lower, short = a.before_maintain
        if lower < a.target or short > 0:
            return "maintain", (
                f"holds only right after the runbook's maintenance: before it (step {step}) "
                f"{setting} had lower bound {lower:.3f} vs {a.target:g} and {100 * short:.1f}% "
                f"of queries got fewer than k rows; maintain (pgvector: VACUUM) at least as "
                f"often as the runbook does ({dmg})")
    if a.lower >= a.target:
        return "hold", (f"holds: {setting} keeps {a.target:g} through the runbook (lower bound "
                        f"{a.lower:.3f} at the last step; {dmg})")
    damaged = a.damage is not None and 100 * a.damage > a.damage_points
    if damaged and a.maintain is not None and a.maintain[0] != "none" and a.damage is not None:
        action, secs, after = a.maintain
        if after - a.recall >= a.damage / 2:
            return "maintain", (f"{action} now (damage {_pts(a.damage)} points, {action} takes "
                                f"{secs:.3g} s)")
    if a.tuned is not None and a.knob:
        return "re-tune", (f"re-tune {a.knob} {a.value} -> {a.tuned} to hold {a.target:g} "
                           f"({dmg})")
    fresh_ok = (a.control_lower is not None and a.control_lower >= a.target) or \
        a.control_tuned is not None
    if fresh_ok:
        why = (f"no {a.knob} up to {a.knob_max} holds {a.target:g} on the churned index"
               if a.knob and a.searched else f"{setting} misses {a.target:g} on the churned index")
        fresh = (f"a fresh build does at {a.knob} {a.control_tuned}"
                 if a.control_tuned is not None and a.knob else "a fresh build does")
        return "rebuild", f"rebuild ({dmg}: {why}; {fresh})"
    if a.control_lower is None:
        return "rebuild", (f"rebuild or re-tune: {setting} misses {a.target:g} (lower bound "
                           f"{a.lower:.3f}) and no control was measured at the last step")
    return "drift", (f"the data drifted past this build: a fresh build on the live set misses "
                     f"{a.target:g} too (lower bound {a.control_lower:.3f}); re-tune the build "
                     f"params")


def advice_dict(a: AdviceInput) -> dict[str, Any]:
    """The advice record: ``action``, ``line`` and, when the runbook maintains, what the
    advice judged before the maintenance (``before_maintain``: step, ``recall_lower``,
    ``short_queries`` as a share of queries)."""
    action, line = advise(a)
    out: dict[str, Any] = {"action": action, "line": line}
    if a.before_maintain is not None:
        step, lower, short = a.before_maintain
        out["before_maintain"] = {"step": step, "recall_lower": lower, "short_queries": short}
    return out


__all__ = ["AdviceInput", "advice_dict", "advise", "judged_damage", "percentiles_ms",
           "short_of_k", "split"]
