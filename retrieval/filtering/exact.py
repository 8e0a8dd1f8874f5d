"""Exact top-k among a subset of the base rows (faiss ``knn``, BLAS): the exact pre-filter search
and the filtered ground truth (:mod:`retrieval.workload.truth`) share it."""

from __future__ import annotations

import numpy as np


def prepared(x: np.ndarray, metric: str) -> np.ndarray:
    """A float32 C-contiguous copy of ``x``, L2-normalised for cosine."""
    import faiss

    x = np.array(x, dtype=np.float32, order="C", copy=True)
    if metric == "cosine":
        faiss.normalize_L2(x)
    return x


def subset_knn(base: np.ndarray, rows: np.ndarray, queries: np.ndarray, metric: str,
               k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k of ``queries`` among ``base[rows]`` (both already prepared for the metric):
    (rwb distances float32 (nq, k), base row ids int64 (nq, k)), -1/+inf past ``len(rows)``."""
    import faiss

    nq = queries.shape[0]
    ids = np.full((nq, k), -1, dtype=np.int64)
    dist = np.full((nq, k), np.inf, dtype=np.float32)
    kk = min(k, int(rows.shape[0]))
    if kk == 0:
        return dist, ids
    sub = base[rows]
    mt = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
    d, i = faiss.knn(queries, sub, kk, metric=mt)
    ids[:, :kk] = np.where(i >= 0, rows[np.maximum(i, 0)], -1)
    dist[:, :kk] = d if metric == "l2" else (-d if metric == "ip" else 1.0 - d)
    return dist, ids
