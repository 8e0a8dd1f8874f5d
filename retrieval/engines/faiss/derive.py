"""Smaller-M HNSW graphs derived from one larger build, without building them.

RP-Tuning's idea (prune, don't rebuild): an HNSW graph built with ``M`` holds, for every node
and level, up to ``2*M`` (level 0) or ``M`` (upper levels) neighbours chosen by the HNSW
heuristic from a larger candidate set. A graph of ``m < M`` is derived by running the SAME
heuristic (HNSW's ``getNeighborsByHeuristic2``, Faiss ``shrink_neighbor_list``: walk the
candidates nearest first, keep one unless it is closer to a neighbour already kept than to the
node) over each node's existing neighbour list, keeping at most ``2*m`` / ``m``. Node levels
and the entry point are kept (they were drawn with ``M``'s level multiplier: the derived graph
has the larger build's level structure, one of the shortcut's approximations). The vectors are
shared, so the derived index answers with the same ids.

This is a shortcut, not a build: its recall can differ from a real ``m`` build's (the
neighbour candidates of a real ``m`` build come from an ``ef_construction`` search over a
sparser graph). rwb measures that error on a few points and reports it (``shortcut_error``);
it is never hidden.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Literal

import numpy as np

from retrieval.data import Metric
from retrieval.errors import ConfigError

log = logging.getLogger(__name__)

try:  # the heuristic is a per-node loop, compiled by numba (installed with the rag extra)
    import numba
except ImportError:  # pragma: no cover - every dev / CI install has it
    numba = None  # type: ignore[assignment]

_prange: Any = numba.prange if numba is not None else range


def _prune_impl(x: np.ndarray, levels: np.ndarray, offsets: np.ndarray,
                neighbors: np.ndarray, cum_old: np.ndarray, cum_new: np.ndarray,
                new_offsets: np.ndarray, out: np.ndarray, use_ip: bool, fill: bool) -> None:
    n = levels.shape[0]
    d = x.shape[1]
    for i in _prange(n):
        for lev in range(levels[i]):
            begin = offsets[i] + cum_old[lev]
            end = offsets[i] + cum_old[lev + 1]
            cap = cum_new[lev + 1] - cum_new[lev]
            dst = new_offsets[i] + cum_new[lev]
            cand = np.empty(end - begin, dtype=np.int64)
            dist = np.empty(end - begin, dtype=np.float32)
            c = 0
            for p in range(begin, end):
                j = neighbors[p]
                if j < 0:
                    break
                s = np.float32(0.0)
                if use_ip:
                    for t in range(d):
                        s -= x[i, t] * x[j, t]
                else:
                    for t in range(d):
                        diff = x[i, t] - x[j, t]
                        s += diff * diff
                cand[c] = j
                dist[c] = s
                c += 1
            order = np.argsort(dist[:c])
            pruned = np.zeros(c, dtype=np.bool_)
            kept = 0
            for oi in range(c):
                j = cand[order[oi]]
                dj = dist[order[oi]]
                good = True
                for r in range(kept):
                    q = out[dst + r]
                    s = np.float32(0.0)
                    if use_ip:
                        for t in range(d):
                            s -= x[j, t] * x[q, t]
                    else:
                        for t in range(d):
                            diff = x[j, t] - x[q, t]
                            s += diff * diff
                    if s < dj:
                        good = False
                        break
                if good:
                    out[dst + kept] = j
                    kept += 1
                    if kept >= cap:
                        break
                else:
                    pruned[oi] = True  # a fill candidate
            if fill and kept < cap:  # keepPrunedConnections: the nearest pruned ones
                for oi in range(c):
                    if kept >= cap:
                        break
                    if pruned[oi]:
                        out[dst + kept] = cand[order[oi]]
                        kept += 1


_KERNEL: Any = None


def _kernel() -> Any:
    """The pruning kernel, compiled by numba on first use with ``cache=True``: the machine code
    is kept in rwb's cache folder (``numba/`` under $RWB_CACHE_DIR or ~/.cache/rwb; a
    NUMBA_CACHE_DIR set by the user wins), so only the first process on a machine pays the
    compilation (~10-15 s on 2 cores), later ones load it (well under a second)."""
    global _KERNEL
    if _KERNEL is None:
        if numba is None:  # pragma: no cover - every dev / CI install has it
            _KERNEL = _prune_impl
        else:
            if not os.environ.get("NUMBA_CACHE_DIR"):
                from retrieval.paths import cache_dir

                numba.config.CACHE_DIR = str(cache_dir() / "numba")  # type: ignore[attr-defined]
            _KERNEL = numba.njit(cache=True, fastmath=True, parallel=True)(_prune_impl)
    return _KERNEL


_WARM = False


def jit_warm_up() -> float:
    """Compile (or load from numba's cache, see :func:`_kernel`) the pruning kernel once per
    process on a tiny graph (seconds spent; 0 when already done): a derivation's ``build_s``
    is then the pruning alone, never numba's compilation (logged once)."""
    global _WARM
    if _WARM:
        return 0.0
    t0 = time.perf_counter()
    x = np.zeros((2, 2), dtype=np.float32)
    one = np.ones(2, dtype=np.int32)
    cum = np.array([0, 2], dtype=np.int64)
    _kernel()(x, one, np.array([0, 2, 4], dtype=np.int64), np.array([1, -1, 0, -1], np.int32),
              cum, cum, np.array([0, 2, 4], dtype=np.int64), np.full(4, -1, np.int32), False,
              True)
    _WARM = True
    seconds = time.perf_counter() - t0
    log.info("compiled or loaded the HNSW pruning kernel in %.2f s (once per process)", seconds)
    return seconds


def hnsw_arrays(index: Any) -> dict[str, np.ndarray]:
    """The graph of a Faiss ``IndexHNSW*`` as numpy arrays (copies): ``levels`` (int32, the
    number of levels each node is on), ``offsets`` (int64, n + 1), ``neighbors`` (int32, -1
    padded), ``cum`` (int32, cumulative neighbour slots per level)."""
    import faiss

    h = index.hnsw
    return {
        "levels": faiss.vector_to_array(h.levels).astype(np.int32),
        "offsets": faiss.vector_to_array(h.offsets).astype(np.int64),
        "neighbors": faiss.vector_to_array(h.neighbors).astype(np.int32),
        "cum": faiss.vector_to_array(h.cum_nneighbor_per_level).astype(np.int32),
    }


def _reverse_fill(x: np.ndarray, out: np.ndarray, starts: np.ndarray, cap: int,
                  use_ip: bool) -> None:
    """Level 0 of a pruned graph (``out``, node i's ``cap`` slots at ``starts[i]``, -1 padded)
    with its free slots filled by REVERSE links, in place: a kept edge i -> j adds j -> i when
    j has room and does not hold i yet, the nearest candidates first (what a real HNSW
    insertion does with the links of its new node). Numpy; memory ~40 bytes per edge."""
    n = len(starts)
    rows = out[starts[:, None] + np.arange(cap)[None, :]]
    present = rows >= 0
    deg = present.sum(axis=1)
    owner = np.repeat(np.arange(n, dtype=np.int64), cap)[present.ravel()]
    target = rows.ravel()[present.ravel()].astype(np.int64)
    have = np.sort(owner * n + target)
    node, cand = target, owner  # the reverse edges: node -> cand
    key = node * n + cand
    pos = np.minimum(np.searchsorted(have, key), len(have) - 1)
    keep = (have[pos] != key) & (deg[node] < cap)
    node, cand = node[keep], cand[keep]
    if not len(node):
        return
    dist = np.empty(len(node), dtype=np.float32)
    for a in range(0, len(node), 1 << 18):  # chunks: x[node] is (chunk, d) float32
        b = a + (1 << 18)
        u, v = x[node[a:b]], x[cand[a:b]]
        dist[a:b] = -np.einsum("ij,ij->i", u, v) if use_ip else np.einsum(
            "ij,ij->i", u - v, u - v)
    order = np.lexsort((dist, node))
    node, cand = node[order], cand[order]
    rank = np.arange(len(node)) - np.searchsorted(node, node, side="left")
    take = rank < (cap - deg[node])
    node, cand, rank = node[take], cand[take], rank[take]
    out[starts[node] + deg[node] + rank] = cand.astype(np.int32)


def derive_hnsw(index: Any, m: int, metric: Metric, *,
                fill: Literal["reverse", "nearest", "none"] = "reverse",
                threads: int | None = None) -> tuple[Any, float]:
    """A Faiss ``IndexHNSWFlat`` with ``M = m`` derived from ``index`` (an ``IndexHNSWFlat`` of
    a larger ``M``) by pruning every neighbour list with the HNSW heuristic; returns the index
    and the seconds the derivation took (perf_counter). ``metric`` is rwb's (``l2``: squared
    Euclidean; ``cosine``: the stored vectors are normalised, so L2 orders like cosine; ``ip``:
    negative inner product, as Faiss's HNSW orders inner products). ``fill``: what fills the
    free level-0 slots after the heuristic: ``reverse`` (the default) the reverse links of
    the kept edges (a real build's lists fill that way; measured closest to real builds'
    degree and recall), ``nearest`` the nearest pruned candidates (hnswlib's
    ``keepPrunedConnections``: denser than a real build, optimistic recall), ``none``
    nothing (sparser, pessimistic); ``threads``: numba threads."""
    import faiss

    if numba is None:
        raise ConfigError("tune.build_search: derived needs numba (pip install numba, or "
                          "retrieval-workbench[rag]); or use tune.build_search: full")
    if threads:
        limit = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
        numba.set_num_threads(max(1, min(int(threads), limit)))
    jit_warm_up()
    t0 = time.perf_counter()
    big_m = int(index.hnsw.nb_neighbors(0)) // 2
    if not 1 <= m <= big_m:
        raise ValueError(f"derived M must be in 1..{big_m} (the source's M); received {m}")
    n, d = int(index.ntotal), int(index.d)
    x = np.ascontiguousarray(index.storage.reconstruct_n(0, n), dtype=np.float32)
    g = hnsw_arrays(index)
    max_levels = len(g["cum"]) - 1
    new = faiss.IndexHNSWFlat(d, m, index.metric_type)
    cum_new = faiss.vector_to_array(new.hnsw.cum_nneighbor_per_level).astype(np.int64)
    if len(cum_new) - 1 < max_levels:  # more levels than the new object's table: extend
        per_upper = m
        extra = [cum_new[-1] + per_upper * (i + 1) for i in range(max_levels - len(cum_new) + 1)]
        cum_new = np.concatenate([cum_new, np.asarray(extra, dtype=np.int64)])
    cum_new = cum_new[: max_levels + 1]
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cum_new[g["levels"]], out=new_offsets[1:])
    out = np.full(int(new_offsets[-1]), -1, dtype=np.int32)
    _kernel()(x, g["levels"], g["offsets"], g["neighbors"], g["cum"].astype(np.int64), cum_new,
           new_offsets, out, metric == "ip", fill == "nearest")
    if fill == "reverse":
        _reverse_fill(x, out, new_offsets[:-1], int(cum_new[1]), metric == "ip")
    new.storage.add(x)
    new.ntotal = n
    h: Any = new.hnsw
    faiss.copy_array_to_vector(cum_new.astype(np.int32), h.cum_nneighbor_per_level)
    faiss.copy_array_to_vector(g["levels"], h.levels)
    faiss.copy_array_to_vector(new_offsets.astype(np.uint64), h.offsets)
    faiss.copy_array_to_vector(out, h.neighbors)
    h.entry_point = index.hnsw.entry_point
    h.max_level = index.hnsw.max_level
    h.efConstruction = index.hnsw.efConstruction
    seconds = time.perf_counter() - t0
    log.info("derived HNSW M=%d from M=%d over %d nodes in %.2f s", m, big_m, n, seconds)
    return new, seconds


def mean_degree(index: Any) -> float:
    """Mean number of level-0 neighbours per node (the graph's density)."""
    g = hnsw_arrays(index)
    starts = g["offsets"][:-1]
    width = int(g["cum"][1])
    rows = g["neighbors"][starts[:, None] + np.arange(width)[None, :]]
    return float((rows >= 0).sum(axis=1).mean())


__all__ = ["derive_hnsw", "hnsw_arrays", "mean_degree"]
