"""Recall and latency summaries, defined once.

- ``recall@k`` (by id): |retrieved top-k ∩ exact top-k| / k per query; -1 ids never match.
- tie-aware ``recall@k``: a retrieved id also counts when its exact distance is within ``eps``
  of the k-th exact distance (ann-benchmarks' convention), so ties at the boundary are not
  penalised; capped at 1.
IR metrics (nDCG, MRR) come from ranx in :mod:`retrieval.stats.irmetrics`, not from here.
"""

from __future__ import annotations

import numpy as np

#: relative tolerance on the k-th exact distance for the tie-aware recall
TIE_EPS = 1e-3


def recall_by_id(found: np.ndarray, exact: np.ndarray, k: int) -> np.ndarray:
    """Per-query recall@k by id intersection (float64 array of length nq)."""
    f = found[:, :k]
    e = exact[:, :k]
    hits = np.zeros(f.shape[0], dtype=np.float64)
    for j in range(f.shape[1]):
        col = f[:, j : j + 1]
        hits += ((col == e) & (col >= 0)).any(axis=1)
    return hits / k


def recall_fewer_than_k(found: np.ndarray, exact: np.ndarray, k: int) -> np.ndarray:
    """Per-query recall@k by id under the fewer-than-k rule: with ``m < k`` exact answers (-1
    past them: a live set or a filter with fewer than k vectors) recall is hits / ``m`` (a
    perfect answer is 1.0, not m / k). float64 (nq,)."""
    f, e = np.asarray(found)[:, :k], np.asarray(exact)[:, :k]
    hits = np.zeros(f.shape[0], dtype=np.float64)
    for j in range(f.shape[1]):
        col = f[:, j : j + 1]
        hits += ((col == e) & (col >= 0)).any(axis=1)
    return hits / np.maximum((e >= 0).sum(axis=1), 1)


def recall_tie_aware(found_dist: np.ndarray, exact_dist: np.ndarray, k: int) -> np.ndarray:
    """Per-query tie-aware recall@k from *exact* distances of the retrieved ids (nq, k) and the
    exact top-k distances (nq, >=k). Distances in rwb convention (lower is closer)."""
    kth = exact_dist[:, k - 1 : k]
    thr = kth + TIE_EPS * np.maximum(np.abs(kth), 1e-12)
    ok = np.isfinite(found_dist[:, :k]) & (found_dist[:, :k] <= thr)
    return np.minimum(ok.sum(axis=1) / k, 1.0).astype(np.float64)


def recall_summary(per_query: np.ndarray, target: float | None = None) -> dict[str, float]:
    """Mean, p5, min of per-query recall, and the share of queries below ``target``."""
    out = {
        "recall": float(per_query.mean()),
        "recall_p5": float(np.percentile(per_query, 5)),
        "recall_min": float(per_query.min()),
    }
    if target is not None:
        out["share_below_target"] = float((per_query < target).mean())
    return out


def latency_summary(latency_ms: np.ndarray) -> dict[str, float]:
    """p50/p95/p99/max/mean of per-query latencies, all in milliseconds."""
    lat = np.asarray(latency_ms, dtype=np.float64)
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    return {
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "max_ms": float(lat.max()),
        "mean_ms": float(lat.mean()),
    }
