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
from retrieval.groundtruth.ooc import canonical_search
from retrieval.paths import cache_dir
from retrieval.phases import phase

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
    """Brute-force top-k with faiss IndexFlat (no cache), ties ordered by id ascending
    (:func:`canonical_search`)."""
    import faiss

    if threads:
        faiss.omp_set_num_threads(threads)
    if metric == "cosine":
        base, queries = normalize_rows(base), normalize_rows(queries)
    index = faiss.IndexFlatL2(base.shape[1]) if metric == "l2" else faiss.IndexFlatIP(base.shape[1])
    index.add(np.ascontiguousarray(base, dtype=np.float32))
    keys, i = canonical_search(index, np.ascontiguousarray(queries, dtype=np.float32), k,
                               int(base.shape[0]), ip=metric != "l2")
    if metric == "l2":
        d = keys
    elif metric == "ip":
        d = keys  # -similarity
    else:
        d = 1.0 - (-keys)
    return GroundTruth(i, np.asarray(d, dtype=np.float32))


def ground_truth(
    ds: VectorDataset, k: int, *, cache: Path | None = None, use_cache: bool = True,
    shards: int | None = None,
) -> GroundTruth:
    """Exact top-k for ``ds`` (k <= 100 or <= n_base), cached by dataset fingerprint.

    Ground truth shipped with the dataset (e.g. ann-benchmarks ``neighbors``) is used when it is
    deep enough; distances are then recomputed exactly for the tie-aware recall. A memory-mapped
    base (:attr:`VectorDataset.out_of_core`), or ``shards`` given, is searched out of core
    (:mod:`retrieval.groundtruth.ooc`: chunked, checkpointed, shards shared by file locks
    between workers using the same cache folder); the result is the same either way.
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
    with phase("ground_truth"):
        return _compute(ds, depth, path, use_cache, shards)


def _compute(ds: VectorDataset, depth: int, path: Path, use_cache: bool,
             shards: int | None) -> GroundTruth:
    if ds.out_of_core or shards is not None:
        gt = _out_of_core(ds, depth, path if use_cache else None, shards or 1)
        if use_cache and path.exists() and gt is None:  # another worker stored it
            with np.load(path) as z:
                return GroundTruth(z["ids"], z["distances"]).top(depth)
        assert gt is not None
        return gt
    gt = exact_knn(ds.base, ds.queries, ds.metric, depth)
    if use_cache:
        _store(path, gt)
    return gt


def _out_of_core(ds: VectorDataset, depth: int, final: Path | None,
                 shards: int) -> GroundTruth | None:
    """Out-of-core exact top-``depth`` (work under ``final``'s folder; None when another
    worker wrote ``final`` meanwhile)."""
    from retrieval.groundtruth.ooc import cleanup, ooc_exact, plan_shards, work_dir
    from retrieval.paths import rwb_tempdir

    with rwb_tempdir("rwb-gt-") as tmp:
        where = final.parent if final is not None else tmp
        got = ooc_exact(ds, depth, cache=where, shards=shards,
                        finished=None if final is None else final.exists)
        if got is None:
            return None
        if final is not None:
            _store(final, GroundTruth(got[0], got[1]))
        cleanup(work_dir(where, ds, depth, len(plan_shards(ds.n_base, shards))))
    return GroundTruth(got[0], got[1])


def _store(path: Path, gt: GroundTruth) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
    os.close(fd)
    with open(tmp, "wb") as fh:
        np.savez(fh, ids=gt.ids, distances=gt.distances)
    os.replace(tmp, path)


def exact_distances(
    ds: VectorDataset, ids: np.ndarray, queries: np.ndarray | None = None
) -> np.ndarray:
    """Exact rwb distances between each query row and the base vectors ``ids`` (nq, k);
    +inf where id is -1. Used for tie-aware recall (an index's own distances may be approximate)."""
    q = ds.queries if queries is None else queries
    safe = np.clip(ids, 0, ds.n_base - 1)
    vecs = np.asarray(ds.base[safe], dtype=np.float32)  # (nq, k, d); a mapped uint8 base too
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
