"""Smaller-``nlist`` IVF coarse quantizers derived from one larger k-means, without training.

``tune.build_search: derived`` over ``nlist`` (hierarchical merges, not training on a
sample): the build with the LARGEST ``nlist`` of a group is trained in full (one k-means on
its training sample); each smaller ``nlist`` is derived by clustering the large build's
centroids into ``nlist`` groups with k-means WEIGHTED by each list's size (so a merged
centroid is the mean of the vectors its lists held, up to the first k-means's error), then
every vector is reassigned to its nearest merged centroid (Faiss ``add``). The encoding (SQ /
PQ / RaBitQ codebooks) is still trained on the build's own training sample against the merged
quantizer (Faiss trains only the encoding when the quantizer is already trained); a flat
encoding needs nothing more.

This is a shortcut: merged centroids are not a k-means optimum of the vectors, so the recall
at a given ``nprobe`` can differ from a real build's; rwb measures that error on the answer
(``shortcut_error``) and reports it. The saving is the k-means of every smaller ``nlist``
(training is ``O(train_size * nlist * dim)`` per iteration, so the largest ``nlist``'s own
k-means bounds what can be saved); the reassignment (``add``) is paid as in a real build.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from retrieval.data import Metric

log = logging.getLogger(__name__)

#: k-means iterations over the source's centroids (Faiss's own default for k-means)
MERGE_ITERATIONS = 25


def merge_centroids(centroids: np.ndarray, sizes: np.ndarray, nlist: int, metric: Metric,
                    seed: int) -> np.ndarray:
    """``nlist`` centroids (float32, ``nlist x dim``) from ``centroids`` (a larger k-means'
    centroids) by k-means over them weighted by ``sizes`` (vectors per list; empty lists get a
    tiny weight so they still count as points). ``metric`` ``ip``/``cosine``: inner-product
    assignment, as Faiss's IVF training does for those metrics."""
    import faiss

    c = np.ascontiguousarray(centroids, dtype=np.float32)
    if not 1 <= nlist <= c.shape[0]:
        raise ValueError(f"derived nlist must be in 1..{c.shape[0]} (the source's nlist); "
                         f"received {nlist}")
    if nlist == c.shape[0]:
        return c.copy()
    w = np.maximum(np.asarray(sizes, dtype=np.float32), 1e-3)
    cp = faiss.ClusteringParameters()
    cp.niter = MERGE_ITERATIONS
    cp.seed = int(seed)
    cp.min_points_per_centroid = 1
    cp.max_points_per_centroid = max(256, c.shape[0])  # never subsample the centroids
    clus = faiss.Clustering(c.shape[1], nlist, cp)
    assign = (faiss.IndexFlatIP(c.shape[1]) if metric in ("ip", "cosine")
              else faiss.IndexFlatL2(c.shape[1]))
    clus.train(c, assign, w)
    merged = faiss.vector_to_array(clus.centroids).reshape(nlist, c.shape[1])
    return np.ascontiguousarray(merged, dtype=np.float32)


def list_sizes(ivf: Any) -> np.ndarray:
    """Vectors held by each inverted list of a Faiss ``IndexIVF`` (int64, ``nlist``)."""
    inv = ivf.invlists
    return np.fromiter((inv.list_size(i) for i in range(int(ivf.nlist))), dtype=np.int64,
                       count=int(ivf.nlist))


def derive_ivf(source_ivf: Any, index: Any, ivf: Any, nlist: int, metric: Metric,
               seed: int) -> float:
    """Fill ``ivf``'s (an untrained ``IndexIVF`` of ``nlist`` lists, inside ``index``)
    quantizer with the merged centroids of ``source_ivf`` (a trained, filled ``IndexIVF`` of a
    larger nlist); returns the merge's seconds (perf_counter). The caller then trains the
    encoding and adds the vectors."""
    t0 = time.perf_counter()
    big = int(source_ivf.nlist)
    centroids = source_ivf.quantizer.reconstruct_n(0, big)
    merged = merge_centroids(centroids, list_sizes(source_ivf), nlist, metric, seed)
    ivf.quantizer.add(merged)
    seconds = time.perf_counter() - t0
    log.info("merged IVF nlist=%d into nlist=%d in %.3f s", big, nlist, seconds)
    return seconds


__all__ = ["derive_ivf", "list_sizes", "merge_centroids"]
