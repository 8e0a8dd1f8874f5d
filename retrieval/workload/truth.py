"""Exact filtered top-k, cached by data + filter, and recall under the fewer-than-k rule.

Each distinct filter of a bucket is searched once for all the queries that use it: its matching
rows are gathered and searched exactly with faiss (``faiss.knn``, BLAS) in one call. A bucket of
many distinct, not very selective filters (one per query) is instead searched with one exact
unfiltered over-fetch (top ``4k / selectivity + k``) then each query's filter, and densely (one
BLAS product over every base row, masked) for the queries it leaves short.

**Fewer-than-k rule.** When a query's filter matches ``m < k`` rows, its exact answer has ``m``
ids (padded with -1 / +inf) and its recall@k is over the available matches: hits / ``m``.
Otherwise recall is hits / k, so a result with fewer than k ids where k matches exist counts the
missing ones as misses. Ids outside the filter never count as hits.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.filtering.exact import prepared, subset_knn
from retrieval.paths import cache_dir
from retrieval.workload.buckets import Bucket

log = logging.getLogger(__name__)

#: relative tolerance on the last exact distance for the tie-aware recall (as metrics.TIE_EPS)
TIE_EPS = 1e-3


@dataclass(frozen=True, eq=False)
class FilteredGT:
    """ids int64 (nq, k), -1 past the matches; distances float32 (rwb convention), +inf there;
    ``n_valid`` int64 (nq,) = min(k, matching rows)."""

    ids: np.ndarray
    distances: np.ndarray

    @property
    def n_valid(self) -> np.ndarray:
        return (self.ids >= 0).sum(axis=1).astype(np.int64)

    def rows(self, idx: np.ndarray) -> FilteredGT:
        return FilteredGT(self.ids[idx], self.distances[idx])


#: many distinct (per-query) filters that are not very selective: one BLAS product per chunk
#: of queries over every base row, masked, beats gathering each filter's rows
DENSE_MIN_FILTERS = 16
DENSE_MIN_SELECTIVITY = 0.2
DENSE_CHUNK = 128


def _dense_masked(b: np.ndarray, q: np.ndarray, bucket: Bucket, metric: str, k: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Every query against every base row (chunks of DENSE_CHUNK queries), rows outside each
    query's filter masked to +inf, then the top-k per row."""
    n, nq = b.shape[0], q.shape[0]
    ids = np.full((nq, k), -1, dtype=np.int64)
    dist = np.full((nq, k), np.inf, dtype=np.float32)
    kk = min(k, n)
    norms = (b * b).sum(axis=1) if metric == "l2" else None
    for s in range(0, nq, DENSE_CHUNK):
        qc = q[s:s + DENSE_CHUNK]
        d = qc @ b.T  # similarities, turned into rwb distances in place
        if norms is not None:
            d *= -2
            d += norms[None, :]
            d += (qc * qc).sum(axis=1)[:, None]
            np.maximum(d, 0, out=d)
        elif metric == "ip":
            np.negative(d, out=d)
        else:
            np.subtract(1.0, d, out=d)
        masks = np.stack([bucket.filter_for(i).mask for i in range(s, s + qc.shape[0])])
        np.copyto(d, np.float32(np.inf), where=~masks)
        part = np.argpartition(d, kk - 1, axis=1)[:, :kk]
        pd = np.take_along_axis(d, part, axis=1)
        order = np.argsort(pd, axis=1, kind="stable")
        top, td = np.take_along_axis(part, order, axis=1), np.take_along_axis(pd, order, axis=1)
        ids[s:s + qc.shape[0], :kk] = np.where(np.isfinite(td), top, -1)
        dist[s:s + qc.shape[0], :kk] = td
    return dist, ids


def _overfetch_then_dense(b: np.ndarray, q: np.ndarray, bucket: Bucket, metric: str, k: int
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Exact unfiltered top-k' (k' = 4k / selectivity + k, one faiss.knn call) then each query's
    filter: exact wherever k' holds min(k, matches) matches (the first matches of an exact list
    are the exact filtered answer); the other queries are searched densely."""
    import faiss

    n, nq = b.shape[0], q.shape[0]
    depth = min(n, int(np.ceil(4 * k / max(bucket.selectivity, 1e-9))) + k)
    mt = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
    d, i = faiss.knn(q, b, depth, metric=mt)
    d = d if metric == "l2" else (-d if metric == "ip" else 1.0 - d)
    ids = np.full((nq, k), -1, dtype=np.int64)
    dist = np.full((nq, k), np.inf, dtype=np.float32)
    redo = []
    for r in range(nq):
        f = bucket.filter_for(r)
        keep = np.flatnonzero(f.mask[np.maximum(i[r], 0)] & (i[r] >= 0))[:k]
        if keep.size < min(k, f.count):
            redo.append(r)
            continue
        ids[r, :keep.size], dist[r, :keep.size] = i[r, keep], d[r, keep]
    if redo:
        sub = Bucket(bucket.name, bucket.target, bucket.filters, bucket.of_query[redo])
        dist[redo], ids[redo] = _dense_masked(b, np.ascontiguousarray(q[redo]), sub, metric, k)
    return dist, ids


def filtered_ground_truth(base: np.ndarray, queries: np.ndarray, metric: str, bucket: Bucket,
                          k: int, *, fingerprint: str | None = None,
                          cache: Path | None = None) -> FilteredGT:
    """Exact top-``k`` of every query among the rows its filter matches (see the module doc).
    Cached under ``cache`` (default ``<cache>/groundtruth-filtered``) by ``fingerprint`` (the
    dataset's), the bucket's filter digest and k; no cache without a fingerprint."""
    path = None
    if fingerprint is not None:
        folder = cache or cache_dir() / "groundtruth-filtered"
        path = folder / f"{fingerprint}-{bucket.digest}-k{k}.npz"
        if path.exists():
            with np.load(path) as z:
                return FilteredGT(z["ids"], z["distances"])
    b, q = prepared(base, metric), prepared(queries, metric)
    nq = q.shape[0]
    ids = np.full((nq, k), -1, dtype=np.int64)
    dist = np.full((nq, k), np.inf, dtype=np.float32)
    if len(bucket.filters) > DENSE_MIN_FILTERS and bucket.selectivity > DENSE_MIN_SELECTIVITY:
        dist, ids = _overfetch_then_dense(b, q, bucket, metric, k)
    else:
        for rf, qs in bucket.groups():
            dist[qs], ids[qs] = subset_knn(b, rf.rows, np.ascontiguousarray(q[qs]), metric, k)
    gt = FilteredGT(ids, dist)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        os.close(fd)
        with open(tmp, "wb") as fh:
            np.savez(fh, ids=ids, distances=dist)
        os.replace(tmp, path)
    return gt


def filtered_recall(found: np.ndarray, gt: FilteredGT, k: int) -> np.ndarray:
    """Per-query recall@k by id under the fewer-than-k rule (float64 (nq,))."""
    f, e = found[:, :k], gt.ids[:, :k]
    hits = np.zeros(f.shape[0], dtype=np.float64)
    for j in range(f.shape[1]):
        col = f[:, j:j + 1]
        hits += ((col == e) & (col >= 0)).any(axis=1)
    return hits / np.maximum(gt.n_valid, 1)


def filtered_recall_tie(found_dist: np.ndarray, gt: FilteredGT, k: int) -> np.ndarray:
    """Tie-aware recall@k: a retrieved id inside the filter counts when its exact distance is
    within TIE_EPS of the last exact filtered distance; same denominator as
    :func:`filtered_recall`. ``found_dist``: exact distances, +inf for ids outside the filter."""
    m = np.maximum(gt.n_valid, 1)
    last = gt.distances[np.arange(m.shape[0]), m - 1][:, None]
    thr = last + TIE_EPS * np.maximum(np.abs(last), 1e-12)
    ok = np.isfinite(found_dist[:, :k]) & (found_dist[:, :k] <= thr)
    return np.minimum(ok.sum(axis=1) / m, 1.0).astype(np.float64)
