"""Honest decisions: lower confidence bounds on recall, the tuning/held-out query split, and
the rule that picks "the cheapest config meeting the target".

A config *meets* the target only when a one-sided lower confidence bound on its mean recall@k
(over the tuning queries) is >= the target; the mean alone is not enough.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from retrieval.errors import ConfigError
from retrieval.stats.sampling import seeded_partition
from retrieval.tune.config import ConfidenceSpec, Objective
from retrieval.tune.results import PointResult

#: How "cheapest" is decided; written into every summary so that a reader knows.
CHEAPEST_RULE = (
    "per build: among configs whose recall lower bound >= target, the smallest value of the "
    "monotone search knob (recall and cost both grow with it); configs without such a knob, and "
    "builds of one backend, compared by the objective (lowest single-query p95 ms, or highest "
    "batch QPS with objective qps, or fewest measured resident bytes per vector with "
    "objective bytes_per_vector, ties by p95), among points whose p95 is within slo_p95_ms "
    "when one is set"
)


def bootstrap_lower(per_query: np.ndarray, level: float, resamples: int, seed: int) -> float:
    """One-sided percentile-bootstrap lower bound on the mean of ``per_query`` (resampling
    queries with replacement, ``resamples`` times, generator seeded with ``seed``)."""
    x = np.asarray(per_query, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        raise ConfigError("cannot bound the recall of an empty query set")
    if np.all(x == x[0]):
        return float(x[0])
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    step = max(1, 2_000_000 // n)  # bound memory: at most ~2M indices at once
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = x[idx].mean(axis=1)
    return float(np.quantile(means, 1.0 - level, method="inverted_cdf"))


def binomial_lower(per_query: np.ndarray, k: int, level: float) -> float:
    """One-sided Wilson score lower bound on the share of the ``n_queries * k`` result slots
    that hold a true neighbour (assumes slots independent: optimistic for mixed queries)."""
    x = np.asarray(per_query, dtype=np.float64)
    trials = x.shape[0] * k
    if trials == 0:
        raise ConfigError("cannot bound the recall of an empty query set")
    hits = float(np.rint(x * k).sum())
    p = hits / trials
    z = NormalDist().inv_cdf(level)
    denom = 1.0 + z * z / trials
    centre = p + z * z / (2 * trials)
    margin = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return float(max(0.0, (centre - margin) / denom))


def lower_bound(per_query: np.ndarray, k: int, conf: ConfidenceSpec, seed: int) -> float:
    """The lower confidence bound of ``conf`` on mean recall (deterministic for a seed)."""
    if conf.method == "binomial":
        return binomial_lower(per_query, k, conf.level)
    return bootstrap_lower(per_query, conf.level, conf.resamples, seed)


@dataclass(frozen=True)
class QuerySplit:
    """Row numbers of the tuning and held-out queries (disjoint, sorted)."""

    tune: np.ndarray
    heldout: np.ndarray
    seed: int

    def describe(self) -> dict[str, int]:
        return {"tuning": int(self.tune.size), "heldout": int(self.heldout.size), "seed": self.seed}


def split_queries(n_queries: int, heldout_fraction: float, seed: int) -> QuerySplit:
    """A seeded random split: ``round(n * heldout_fraction)`` held-out queries (>= 1 when the
    fraction is > 0), the rest for tuning (>= 1)."""
    if n_queries < 1:
        raise ConfigError("the dataset has no queries to tune on")
    n_held = 0 if heldout_fraction <= 0 else max(1, round(n_queries * heldout_fraction))
    if n_held >= n_queries:
        raise ConfigError(
            f"field 'tune.heldout_fraction' leaves no tuning queries: {n_queries} queries, "
            f"{n_held} held out; received {heldout_fraction}"
        )
    heldout, tune = seeded_partition(n_queries, n_held, seed)
    return QuerySplit(tune, heldout, seed)


def objective_value(p: PointResult, objective: Objective) -> float:
    """The objective of a point, as a quantity to minimise (QPS is negated)."""
    if objective == "qps":
        return -(p.qps or 0.0)
    if objective == "bytes_per_vector":
        return p.bytes_per_vector if p.bytes_per_vector is not None else math.inf
    return p.p95_ms if p.p95_ms is not None else math.inf


def within_slo(p: PointResult, slo_p95_ms: float | None) -> bool:
    """A point meets the latency SLO when it has none, or its measured p95 (ms) is <= it (a
    point without a single-query p95 cannot be shown to meet one)."""
    return slo_p95_ms is None or (p.p95_ms is not None and p.p95_ms <= slo_p95_ms)


def choose(
    points: Sequence[PointResult], knob: str | None, objective: Objective
) -> PointResult | None:
    """The cheapest point meeting the target (see :data:`CHEAPEST_RULE`), or None.

    With a monotone ``knob``, points are grouped by their other search params and only the
    smallest knob value meeting the target in each group competes on the objective.
    """
    ok = [p for p in points if p.meets]
    if not ok:
        return None
    if knob is not None:
        best: dict[str, PointResult] = {}
        for p in ok:
            rest = repr(sorted((k, v) for k, v in p.search.items() if k != knob))
            cur = best.get(rest)
            if cur is None or p.search.get(knob, 0) < cur.search.get(knob, 0):
                best[rest] = p
        ok = list(best.values())
    return min(ok, key=lambda p: (*rank_key(p, objective), repr(sorted(p.search.items()))))


def rank_key(p: PointResult, objective: Objective) -> tuple[float, float]:
    """Sort key of a point meeting the target: its objective, then its latency (ms). A target
    search's probes have no single-query p95: their batch ms per query (1000 / QPS, one pass)
    stands in, so the steps of a two-knob staircase can be compared."""
    batch = 1000.0 / p.qps if p.qps else math.inf
    latency = p.p95_ms if p.p95_ms is not None else batch
    value = objective_value(p, objective)
    if objective == "p95_ms" and p.p95_ms is None:
        value = batch
    return value, latency
