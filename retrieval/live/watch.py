"""`rwb watch`, the pure part: the ``watch:`` section, one window's figures, the alarm rule, the
advice line. numpy and the project's bound only (no I/O); the loop is in
:mod:`retrieval.live.watch_run`.

Plan -> measure -> summarise:

- plan: :class:`WatchSection` (``window`` checked queries per window, ``sample`` the share of
  logged queries checked, ``target_recall``, ``windows_to_alarm``, ``webhook``) and
  :func:`sampled` (which logged queries are checked: seeded, reproducible);
- measure: per checked query, the ANN ids at the exported search params, its single-query time
  (ms) and the exact ids (the engine's exact path) -> :func:`query_recall`;
- summarise: :func:`window_figures` (``recall``, ``recall_lower``, ``p50_ms`` / ``p95_ms`` /
  ``p99_ms``, ``checked``) and :class:`AlarmRule` (the alarm is up while the lower bound has
  stayed under the target for ``windows_to_alarm`` consecutive windows).

The lower bound is the one-sided Wilson bound on the share of the window's ``checked * k`` result
slots that hold a true neighbour, from :mod:`retrieval.stats.binomial` (the sweeps' ``binomial``
confidence method): ``1 - wilson_upper(missed slots, slots, level)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from retrieval.stats.binomial import wilson_upper

#: the JSON keys of one window (``--json`` ``windows[*]`` and each JSONL line)
WINDOW_KEYS = ("window", "recall", "recall_lower", "p50_ms", "p95_ms", "p99_ms", "checked",
               "alarm")


class WatchSection(BaseModel):
    """The ``watch:`` section of a spec.

    ``window``: checked queries per window (a window closes after that many); ``sample``: the
    share of logged queries that are checked (0 < sample <= 1; seeded by ``seed``, the same
    queries on a re-run); ``target_recall``: the recall@k the lower bound must hold (default: the
    spec's ``target_recall``); ``windows_to_alarm``: consecutive windows under the target that
    raise the alarm; ``webhook``: a URL the alarm is POSTed to (JSON; ``webhook_timeout_s``
    seconds at most, in a thread: never blocks the watch); ``confidence``: the one-sided level
    of the lower bound; ``poll_s``: seconds between two looks at a followed log that has not
    grown; ``retune``: re-run an alarmed window's queries at higher knob values to name the knob
    the window needs (costs up to ``len(retune_factors) * window`` live searches, once per alarm).
    """

    model_config = ConfigDict(extra="forbid")

    window: int = Field(200, ge=1, le=1_000_000)
    sample: float = Field(0.01, gt=0.0, le=1.0)
    target_recall: float | None = Field(None, gt=0.0, le=1.0)
    windows_to_alarm: int = Field(2, ge=1, le=10_000)
    webhook: str | None = Field(None, pattern=r"^https?://")
    webhook_timeout_s: float = Field(5.0, gt=0.0, le=60.0)
    confidence: float = Field(0.95, ge=0.5, lt=1.0)
    poll_s: float = Field(0.5, gt=0.0, le=60.0)
    retune: bool = True
    retune_factors: tuple[float, ...] = (1.5, 2.0, 3.0, 4.0, 8.0)
    seed: int = 0


def sampled(key: str, share: float, seed: int) -> bool:
    """Whether the logged query ``key`` (its id, or its line number) is checked: a seeded hash
    below ``share`` (the same answer on every run and every machine)."""
    if share >= 1.0:
        return True
    h = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64 < share


def query_recall(ann: np.ndarray, exact: np.ndarray, k: int) -> float:
    """recall@k of one query by id: ``|ann top-k ∩ exact top-k| / min(k, true ids)`` (-1 ids
    ignored; 1.0 when the collection has no row for it)."""
    truth = {int(i) for i in np.asarray(exact)[:k] if i >= 0}
    if not truth:
        return 1.0
    got = {int(i) for i in np.asarray(ann)[:k] if i >= 0}
    return len(truth & got) / len(truth)


def recall_lower(per_query: Sequence[float] | np.ndarray, k: int, level: float) -> float:
    """One-sided Wilson lower bound (at ``level``) on the share of the ``n * k`` result slots
    holding a true neighbour: ``1 - wilson_upper(missed, slots)`` (0.0 for no query)."""
    x = np.asarray(per_query, dtype=np.float64)
    slots = int(x.size) * k
    if slots == 0:
        return 0.0
    hits = int(np.rint(x * k).sum())
    return float(max(0.0, 1.0 - float(wilson_upper(slots - hits, slots, level))))


def percentiles_ms(ms: Sequence[float] | np.ndarray) -> dict[str, float | None]:
    """p50 / p95 / p99 of per-query ANN times (ms); None when there were none."""
    a = np.asarray(ms, dtype=np.float64)
    if a.size == 0:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {"p50_ms": float(p50), "p95_ms": float(p95), "p99_ms": float(p99)}


def window_figures(index: int, per_query: Sequence[float], ms: Sequence[float], k: int,
                   level: float) -> dict[str, Any]:
    """The figures of window ``index`` (0-based): ``recall`` (mean recall@k), ``recall_lower``,
    ``p50_ms`` / ``p95_ms`` / ``p99_ms`` (ANN single-query times, ms), ``checked``; ``alarm``
    is set by :class:`AlarmRule`."""
    x = np.asarray(per_query, dtype=np.float64)
    return {"window": index, "recall": float(x.mean()) if x.size else None,
            "recall_lower": recall_lower(x, k, level), **percentiles_ms(ms),
            "checked": int(x.size), "alarm": False}


@dataclass
class AlarmRule:
    """The alarm: up once the lower bound has been under ``target`` for ``windows_to_alarm``
    consecutive windows, down at the first window whose lower bound meets it again.

    :meth:`update` returns (alarm state after this window, whether it was raised just now)."""

    target: float
    windows_to_alarm: int
    streak: int = 0
    up: bool = False
    raised: int = 0

    def update(self, lower: float) -> tuple[bool, bool]:
        self.streak = self.streak + 1 if lower < self.target else 0
        was = self.up
        self.up = self.streak >= self.windows_to_alarm
        if self.up and not was:
            self.raised += 1
        return self.up, self.up and not was


def knob_values(current: int, high: int, factors: Sequence[float]) -> list[int]:
    """Higher values of a monotone knob to try: ``current * f`` for each factor, capped at
    ``high``, increasing, without repeats and above ``current``."""
    out: list[int] = []
    for f in sorted(factors):
        v = min(high, int(np.ceil(current * f)))
        if v > current and v not in out:
            out.append(v)
    return out


def advice(*, target: float, lower: float, windows: int, knob: str | None,
           value: int | None, tuned: int | None, tried: Sequence[int]) -> tuple[str, str]:
    """(action, one line naming what to do), in the churn advice's words: ``re-tune`` (a higher
    knob value holds the target on the window's own queries), ``rebuild`` (none of the values
    tried does: vacuum / compact the collection first where it has deletes, else rebuild the
    index), ``vacuum-or-rebuild`` (no knob to turn)."""
    head = (f"recall lower bound {lower:.3f} < target {target:g} for {windows} consecutive "
            f"window{'s' if windows != 1 else ''}")
    if knob and value is not None and tuned is not None:
        return "re-tune", (f"{head}: re-tune {knob} {value} -> {tuned} to hold {target:g} (the "
                           f"window's queries meet it there), export it and deploy it; if the "
                           f"collection had many deletes, vacuum / compact it")
    if knob and value is not None and tried:
        return "rebuild", (f"{head}: no {knob} up to {max(tried)} holds {target:g} on the "
                           f"window's queries: vacuum / compact the collection (deleted rows, "
                           f"unmerged segments), else rebuild the index, then re-tune")
    return "vacuum-or-rebuild", (f"{head}: vacuum / compact the collection, else rebuild the "
                                 f"index, then re-tune ({knob or 'no monotone knob'}"
                                 f" was not searched)")


def lab_gap(lab: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """The lab-vs-production gap: live minus lab for recall, its lower bound (points as
    fractions) and p95 ms (None where either side is missing)."""
    def diff(a: Any, b: Any) -> float | None:
        return None if a is None or b is None else float(b) - float(a)

    return {"recall": diff(lab.get("recall"), live.get("recall")),
            "recall_lower": diff(lab.get("recall_lower"), live.get("recall_lower")),
            "p95_ms": diff(lab.get("p95_ms"), live.get("p95_ms"))}





__all__ = ["WINDOW_KEYS", "AlarmRule", "WatchSection", "advice",
           "knob_values", "lab_gap", "percentiles_ms", "query_recall", "recall_lower", "sampled",
           "window_figures"]
