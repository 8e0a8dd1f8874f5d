"""Exact k-nearest neighbours with Faiss flat search, cached on disk by data hash and metric."""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.data import Metric, VectorDataset, normalize_rows
from retrieval.errors import ConfigError
from retrieval.paths import cache_dir

log = logging.getLogger(__name__)

#: ground truth is always computed at this depth and sliced, so any k <= 100 reuses one file
GT_DEPTH = 100


@dataclass(frozen=True, eq=False)
class GroundTruth:
    """Exact neighbours: ids int64 (nq, depth); distances float32 (nq, depth), rwb convention
    (lower is closer: squared L2, -inner product, or cosine distance 0..2)."""

    ids: np.ndarray
    distances: np.ndarray

    @property
    def depth(self) -> int:
        return int(self.ids.shape[1])

    def top(self, k: int) -> GroundTruth:
        return GroundTruth(self.ids[:, :k], self.distances[:, :k])

    def rows(self, idx: np.ndarray) -> GroundTruth:
        return GroundTruth(self.ids[idx], self.distances[idx])


def exact_knn(
    base: np.ndarray, queries: np.ndarray, metric: Metric, k: int, threads: int | None = None
) -> GroundTruth:
    """Brute-force top-k with faiss IndexFlat (no cache)."""
    import faiss

    if threads:
        faiss.omp_set_num_threads(threads)
    if metric == "cosine":
        base, queries = normalize_rows(base), normalize_rows(queries)
    index = faiss.IndexFlatL2(base.shape[1]) if metric == "l2" else faiss.IndexFlatIP(base.shape[1])
    index.add(np.ascontiguousarray(base, dtype=np.float32))
    d, i = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    if metric == "ip":
        d = -d
    elif metric == "cosine":
        d = 1.0 - d
    return GroundTruth(i.astype(np.int64), d.astype(np.float32))


def ground_truth(
    ds: VectorDataset, k: int, *, cache: Path | None = None, use_cache: bool = True
) -> GroundTruth:
    """Exact top-k for ``ds`` (k <= 100 or <= n_base), cached by dataset fingerprint.

    Ground truth shipped with the dataset (e.g. ann-benchmarks ``neighbors``) is used when it is
    deep enough; distances are then recomputed exactly for the tie-aware recall.
    """
    if k < 1:
        raise ConfigError(f"field 'k' must be >= 1; received {k}")
    if k > ds.n_base:
        raise ConfigError(
            f"field 'k' must be <= the number of base vectors ({ds.n_base}); received {k}"
        )
    depth = min(max(GT_DEPTH, k), ds.n_base)
    if ds.gt_ids is not None and ds.gt_ids.shape[1] >= k:
        ids = np.asarray(ds.gt_ids[:, :depth], dtype=np.int64)
        return GroundTruth(ids, exact_distances(ds, ids))
    path = (cache or cache_dir() / "groundtruth") / f"{ds.fingerprint}-d{depth}.npz"
    if use_cache and path.exists():
        with np.load(path) as z:
            log.debug("ground truth cache hit %s", path)
            return GroundTruth(z["ids"], z["distances"]).top(depth)
    log.info("computing exact top-%d for %s (%d x %d)", depth, ds.name, ds.n_queries, ds.n_base)
    gt = exact_knn(ds.base, ds.queries, ds.metric, depth)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        os.close(fd)
        with open(tmp, "wb") as fh:
            np.savez(fh, ids=gt.ids, distances=gt.distances)
        os.replace(tmp, path)
    return gt


def exact_distances(
    ds: VectorDataset, ids: np.ndarray, queries: np.ndarray | None = None
) -> np.ndarray:
    """Exact rwb distances between each query row and the base vectors ``ids`` (nq, k);
    +inf where id is -1. Used for tie-aware recall (an index's own distances may be approximate)."""
    q = ds.queries if queries is None else queries
    safe = np.clip(ids, 0, ds.n_base - 1)
    vecs = ds.base[safe]  # (nq, k, d)
    if ds.metric == "l2":
        diff = vecs - q[:, None, :]
        out = np.einsum("qkd,qkd->qk", diff, diff)
    else:
        qq = normalize_rows(q) if ds.metric == "cosine" else q
        if ds.metric == "cosine":
            norms = np.linalg.norm(vecs, axis=2, keepdims=True)
            norms[norms == 0] = 1.0
            vecs = vecs / norms
        sims = np.einsum("qkd,qd->qk", vecs, qq)
        out = -sims if ds.metric == "ip" else 1.0 - sims
    out = out.astype(np.float32)
    out[ids < 0] = np.inf
    return out
