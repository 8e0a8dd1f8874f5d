"""Per-query ef policies and the tuned fixed setting they are judged against (pure numpy).

Every number here comes from per-query measurements of fixed ``ef_search`` values on the same
queries (:class:`Trace`: ids, per-query recall@k by id, distance computations, ms), so a policy
is replayed exactly from them:

- ``ada_ef``: a pre-search at ``pre_ef`` gives a feature (:func:`feature_of`); a table fitted on
  the tuning queries (:func:`fit_ef_table`: quantile bins of the feature, each given the ef
  that buys the most recall per distance computation until the mean, and 5th percentile if
  asked, recall@k over the tuning queries meets the target) maps it to the query's ef. The
  query is searched again at that ef (a restart: the library cannot continue a search), so
  its cost is the pre-search's distance computations plus the second search's; a query whose
  ef is ``pre_ef`` keeps the pre-search's answer at the pre-search's cost.
- ``early_stop``: restart-based termination: ef ``pre_ef``, then doubled, until two consecutive
  rounds return the same top-k set (or the largest ef is reached); the cost is every round's.

:func:`cheapest_fixed` is the fixed ef with the lowest mean distance computations whose mean
AND 5th-percentile recall@k on the same queries reach the policy's; :func:`judge` compares the
two and says which wins (the fixed setting wins a tie).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.stats.metrics import recall_by_id

COST_UNIT = "distance computations"
#: float tolerance when a fixed setting's mean / p5 is compared with the policy's
EPS = 1e-12


def quality(recall: np.ndarray) -> tuple[float, float]:
    """Mean and 5th percentile (``np.percentile``, linear, as ``recall_p5`` everywhere in rwb)
    of per-query recall@k."""
    r = np.asarray(recall, dtype=np.float64)
    return float(r.mean()), float(np.percentile(r, 5))


@dataclass(frozen=True, eq=False)
class Trace:
    """One fixed ef on a set of queries: ids (nq, k), distances (nq, k, rwb convention: lower
    is closer), per-query recall@k by id, distance computations (int64) and latency (ms)."""

    ef: int
    ids: np.ndarray
    distances: np.ndarray
    recall: np.ndarray
    ndis: np.ndarray
    ms: np.ndarray

    @classmethod
    def of(cls, ef: int, ids: np.ndarray, distances: np.ndarray, exact: np.ndarray, k: int,
           ndis: np.ndarray, ms: np.ndarray) -> Trace:
        return cls(int(ef), ids, distances, recall_by_id(ids, exact, k),
                   np.asarray(ndis, dtype=np.int64), np.asarray(ms, dtype=np.float64))

    def take(self, rows: np.ndarray) -> Trace:
        return Trace(self.ef, self.ids[rows], self.distances[rows], self.recall[rows],
                     self.ndis[rows], self.ms[rows])

    @property
    def cost(self) -> float:
        """Mean distance computations per query."""
        return float(self.ndis.mean())


def feature_of(pre: Trace, feature: str) -> np.ndarray:
    """The pre-search feature per query (float64): ``gap`` = ``(d_k - d_1) / max(|d_k|, 1e-12)``
    (relative spread of the top-k distances: small when the neighbours are hard to tell apart),
    ``first`` = ``d_1``, ``ndis`` = the pre-search's distance computations."""
    if feature == "ndis":
        return pre.ndis.astype(np.float64)
    d = pre.distances.astype(np.float64)
    d = np.where(np.isfinite(d), d, np.nan)
    first = d[:, 0]
    if feature == "first":
        return np.nan_to_num(first, nan=np.inf)
    last = np.nanmax(d, axis=1)
    gap = (last - first) / np.maximum(np.abs(last), 1e-12)
    return np.nan_to_num(gap, nan=0.0)


@dataclass(frozen=True)
class EfTable:
    """ada_ef's table: ``edges`` (ascending inner bin edges of the feature) and the ef of each
    bin (``len(efs) == len(edges) + 1``); ``counts``: tuning queries per bin."""

    feature: str
    pre_ef: int
    edges: tuple[float, ...]
    efs: tuple[int, ...]
    counts: tuple[int, ...]

    def ef_for(self, values: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(np.asarray(self.edges, dtype=np.float64), values, side="right")
        return np.asarray(self.efs, dtype=np.int64)[idx]

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.feature, "pre_ef": self.pre_ef, "edges": list(self.edges),
                "ef_per_bin": list(self.efs), "tuning_queries_per_bin": list(self.counts)}


def meets(recall: np.ndarray, mean: float, p5: float | None) -> bool:
    """Whether per-query recall reaches ``mean`` and (when given) ``p5``."""
    m, q = quality(recall)
    return m >= mean - EPS and (p5 is None or q >= p5 - EPS)


def fit_ef_table(pre: Trace, profile: Mapping[int, Trace], feature: str, bins: int,
                 target_mean: float, target_p5: float | None) -> EfTable:
    """ada_ef's table from the tuning queries: ``bins`` quantile bins of the pre-search feature
    (fewer when values repeat), every bin starting at the smallest ef of ``profile`` (same
    queries); then, greedily, the bin whose next ef buys the most per distance computation is
    raised one step (recall gained while the mean misses ``target_mean``; queries lifted to
    ``target_p5`` while only the p5 misses) until the mean and p5 over all tuning queries meet
    the targets or every bin is at the largest ef. Costs are as :func:`run_ada_ef` counts them
    (the pre-search plus the second search)."""
    f = feature_of(pre, feature)
    qs = np.quantile(f, np.arange(1, bins) / bins) if bins > 1 else np.zeros(0)
    edges = tuple(float(e) for e in np.unique(qs))
    which = np.searchsorted(np.asarray(edges, dtype=np.float64), f, side="right")
    levels = sorted(profile)
    rec = np.stack([profile[e].recall for e in levels])
    cost = np.stack([pre.ndis + (0 if e == pre.ef else profile[e].ndis) for e in levels])
    members = [np.flatnonzero(which == b) for b in range(len(edges) + 1)]
    at = [0 if m.size else len(levels) - 1 for m in members]

    def recall_now() -> np.ndarray:
        out = np.empty(f.size, dtype=np.float64)
        for m, i in zip(members, at, strict=True):
            out[m] = rec[i, m]
        return out

    while not meets(recall_now(), target_mean, target_p5):
        mean_ok = quality(recall_now())[0] >= target_mean - EPS
        best, best_value = None, -np.inf
        for b, (m, i) in enumerate(zip(members, at, strict=True)):
            if i + 1 >= len(levels):
                continue
            if mean_ok and target_p5 is not None:
                gain = float(np.sum(rec[i + 1, m] >= target_p5) - np.sum(rec[i, m] >= target_p5))
            else:
                gain = float(rec[i + 1, m].sum() - rec[i, m].sum())
            spent = max(float(cost[i + 1, m].sum() - cost[i, m].sum()), 1e-9)
            value = gain / spent
            if value > best_value:
                best, best_value = b, value
        if best is None:
            break
        at[best] += 1
    efs = tuple(int(levels[i]) for i in at)
    return EfTable(feature, pre.ef, edges, efs, tuple(int(m.size) for m in members))


@dataclass(frozen=True, eq=False)
class Outcome:
    """A policy replayed on a set of queries: per query the final ef, recall@k, distance
    computations (every search the policy made) and ms (their sum). ``detail`` holds
    ``cost_if_continued``: the mean distance computations of the last search alone, a lower
    bound on what the policy would cost inside an engine that continues a search instead of
    restarting it (neither Faiss nor hnswlib can)."""

    policy: str
    ef: np.ndarray
    recall: np.ndarray
    ndis: np.ndarray
    ms: np.ndarray
    detail: dict[str, Any]

    @property
    def cost(self) -> float:
        return float(self.ndis.mean())


def run_ada_ef(table: EfTable, pre: Trace, profile: Mapping[int, Trace]) -> Outcome:
    """ada_ef on the queries of ``pre`` / ``profile`` (every ef of the table measured)."""
    ef = table.ef_for(feature_of(pre, table.feature))
    recall, ndis, ms = pre.recall.copy(), pre.ndis.copy(), pre.ms.copy()
    for e in np.unique(ef):
        if int(e) == pre.ef:
            continue
        rows = np.flatnonzero(ef == e)
        t = profile[int(e)]
        recall[rows] = t.recall[rows]
        ndis[rows] += t.ndis[rows]
        ms[rows] += t.ms[rows]
    final = np.where(ef == pre.ef, pre.ndis, ndis - pre.ndis)
    return Outcome("ada_ef", ef, recall, ndis, ms,
                   {"table": table.to_dict(), "cost_if_continued": float(final.mean())})


def doubling_chain(start: int, top: int) -> list[int]:
    """``start``, ``2 start``, ... up to ``top`` (``top`` itself last when it is not on it)."""
    chain = [start]
    while chain[-1] * 2 <= top:
        chain.append(chain[-1] * 2)
    if chain[-1] < top:
        chain.append(top)
    return chain


def run_early_stop(profile: Mapping[int, Trace], chain: list[int]) -> Outcome:
    """Restart-based termination over ``chain`` (every ef measured in ``profile``): a query
    stops at the first round whose top-k set equals the previous round's."""
    first = profile[chain[0]]
    n = first.recall.size
    ef = np.full(n, chain[0], dtype=np.int64)
    recall, ndis, ms = first.recall.copy(), first.ndis.copy(), first.ms.copy()
    running = np.ones(n, dtype=bool)
    prev = np.sort(first.ids, axis=1)
    for e in chain[1:]:
        t = profile[e]
        rows = np.flatnonzero(running)
        ndis[rows] += t.ndis[rows]
        ms[rows] += t.ms[rows]
        recall[rows] = t.recall[rows]
        ef[rows] = e
        cur = np.sort(t.ids, axis=1)
        running &= ~(cur == prev).all(axis=1)
        prev = cur
    rounds = np.searchsorted(np.asarray(chain), ef) + 1
    final = np.stack([profile[e].ndis for e in chain])[rounds - 1, np.arange(n)]
    return Outcome("early_stop", ef, recall, ndis, ms,
                   {"chain": chain, "mean_rounds": float(rounds.mean()),
                    "cost_if_continued": float(final.mean())})


@dataclass(frozen=True)
class Fixed:
    """The tuned fixed setting at the policy's quality (None fields: none reached it)."""

    ef: int | None
    cost: float | None
    mean: float | None
    p5: float | None
    p50_ms: float | None


def cheapest_fixed(traces: Mapping[int, Trace], mean: float, p5: float) -> Fixed:
    """The fixed ef with the lowest mean distance computations (ties: smaller ef) whose mean
    AND p5 recall@k on these queries reach ``mean`` and ``p5``."""
    ok = [t for t in traces.values() if meets(t.recall, mean, p5)]
    if not ok:
        return Fixed(None, None, None, None, None)
    best = min(ok, key=lambda t: (t.cost, t.ef))
    m, q = quality(best.recall)
    return Fixed(best.ef, best.cost, m, q, float(np.percentile(best.ms, 50)))


def judge(out: Outcome, fixed: Fixed, searched: tuple[int, int]) -> dict[str, Any]:
    """``vs_fixed`` of a policy: the fixed setting's ef, cost, mean, p5, p50 ms, the ratio
    policy cost / fixed cost, ``winner`` (``fixed`` on a tie) and a one-line ``verdict``."""
    mean, p5 = quality(out.recall)
    base = {"knob": "ef_search", "searched": list(searched)}
    if fixed.ef is None or fixed.cost is None:
        return {**base, "value": None, "cost": None, "ratio": None, "winner": "policy",
                "verdict": f"no fixed ef_search in [{searched[0]}, {searched[1]}] reaches the "
                           f"policy's mean {mean:.4f} and p5 {p5:.4f}: the policy wins"}
    ratio = out.cost / fixed.cost if fixed.cost > 0 else float("inf")
    winner = "fixed" if ratio >= 1.0 else "policy"
    head = ("the tuned fixed setting wins" if winner == "fixed" else f"{out.policy} wins")
    return {**base, "value": fixed.ef, "cost": fixed.cost, "mean": fixed.mean, "p5": fixed.p5,
            "p50_ms": fixed.p50_ms, "ratio": ratio, "winner": winner,
            "verdict": f"{head}: fixed ef_search={fixed.ef} reaches mean {fixed.mean:.4f} / p5 "
                       f"{fixed.p5:.4f} at {fixed.cost:.1f} {COST_UNIT} per query; "
                       f"{out.policy} costs {out.cost:.1f} (x{ratio:.3f}) for mean "
                       f"{mean:.4f} / p5 {p5:.4f}"}
