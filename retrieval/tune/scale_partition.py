"""knob(N), fourth model: the coarse PARTITION (``predicted_partition``), for IVF builds whose
lists hold exact vectors (Faiss IVF with code ``Flat``; other codes: no prediction, the reason
in ``partition_fit``).

With exact distances inside the probed lists, recall@k at ``nprobe`` p is FIXED by the coarse
partition: a true neighbour is returned iff its list is among the p lists nearest the query
(ties aside). So the knob at the full N needs neither the full-N index nor a search of it:

1. the coarse quantizer is trained with the FULL-N ``nlist`` (the build rule evaluated at N)
   by the backend's own training path
   (:meth:`~retrieval.indexes.base.SupportsCoarsePartition.coarse_partition`: the same
   factory, seed, metric handling and training subsample rule as its build) on the full
   base, so on the very rows the full-N build trains on (Faiss IVF: at most 256 per list,
   drawn with the build's seed; every row below 256 x nlist): its lists ARE the full build's.
   Why not the study's largest sample (:data:`TRAIN_ON` ``"largest sample"``, kept for
   comparison): k-means with fewer training rows per list leaves the lists unbalanced
   (in high dimension a centroid averaged over more rows sits nearer its cluster's centre and
   draws more of the base), and the knob follows the balance: on 20,000 x 96 clustered rows
   (nlist 566) the knob from quantizers trained on 1/8, 1/4, 1/2 and all of the base was 8,
   12, 14 and 17 (the build's);
2. only the base rows that are some tuning query's exact full-N ``k`` nearest (the ground
   truth the study computes anyway) are assigned to their nearest centroid;
3. each tuning query ranks the lists by its coarse distance; its recall@k at p is the share of
   its ``k`` true neighbours whose list ranks below p (:func:`partition_recall`);
4. the knob is the smallest p whose recall LOWER BOUND over the tuning queries (the sweep's own
   :func:`~retrieval.tune.decide.lower_bound`, as every probe of the study) meets the target,
   found by the sweep's own target search (:func:`retrieval.tune.target.solve`).

Cost: the build's k-means (most of an IVF-Flat build's seconds) plus ``k x Q`` assignments
and ``Q`` list rankings; it saves filling the lists (every base row assigned), the full-N
index's memory and every search of it. Its prediction is exact up to distance ties.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from retrieval.indexes.base import CoarsePartition, SupportsCoarsePartition
from retrieval.tune import target as tgt

#: which rows train the quantizer: ``"build"`` (the full build's own training rows: its lists
#: exactly) or ``"largest sample"`` (the study's largest sample: cheaper, the lists less
#: balanced; for comparison, e.g. ``benchmarks/scale_transfer.py --partition-train``)
TRAIN_ON: Literal["build", "largest sample"] = "build"
#: what ``partition_fit.training`` says for each
TRAINING = {
    "build": "the full-N build's own training rows (its rule at the full N, its seed)",
    "largest sample": "the study's largest sample",
}


def partition_recall(ranks: np.ndarray, lists: np.ndarray, k: int) -> np.ndarray:
    """Per-query recall@k at every nprobe: ``(nlist, nq)``, row ``p - 1`` for nprobe p.

    ``ranks``: each query's lists nearest first (``(nq, nlist)``); ``lists``: the list of
    each of its true ``k`` nearest (``(nq, k)``, -1 where the ground truth has no neighbour,
    never counted; recall is out of ``k``)."""
    nq, nlist = ranks.shape
    where = np.empty_like(ranks)
    where[np.arange(nq)[:, None], ranks] = np.arange(nlist)[None, :]
    valid = lists >= 0
    pos = np.where(valid, where[np.arange(nq)[:, None], np.maximum(lists, 0)], nlist)
    counts = np.zeros((nq, nlist + 1), dtype=np.int64)
    np.add.at(counts, (np.broadcast_to(np.arange(nq)[:, None], pos.shape), pos), 1)
    return (np.cumsum(counts, axis=1)[:, :nlist] / float(k)).T


def partition_knob(per_query: np.ndarray, target: float, lower: Callable[[np.ndarray], float],
                   eps: float) -> tuple[int | None, float | None]:
    """The smallest nprobe (1-based) whose ``lower(per-query recalls)`` meets ``target`` (within
    ``eps``) and that bound; (None, bound at nlist) when even every list misses."""
    nlist = per_query.shape[0]
    bounds: dict[int, float] = {}

    def lb(p: int) -> float:
        if p not in bounds:
            bounds[p] = float(lower(per_query[p - 1]))
        return bounds[p]

    out = tgt.solve(1, nlist, lambda p: lb(p) >= target - eps)
    if out.value is None:
        return None, lb(nlist)
    return int(out.value), lb(int(out.value))


@dataclass(frozen=True)
class PartitionFit:
    """What the partition model measured (seconds: perf_counter)."""

    nlist: int
    train_rows: int
    training: str
    train_s: float
    assign_s: float
    assigned: int
    queries: int
    codes: tuple[str, ...]
    recall: float | None
    recall_lb: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"model": "coarse partition", "nlist": self.nlist, "train_rows": self.train_rows,
                "training": self.training, "train_s": self.train_s, "assign_s": self.assign_s,
                "seconds": self.train_s + self.assign_s, "assigned_rows": self.assigned,
                "queries": self.queries, "codes_covered": list(self.codes),
                "recall_at_knob": self.recall, "recall_lb_at_knob": self.recall_lb,
                "reason": None,
                "formula": "recall_q(p) = |{true k-NN of q whose list ranks < p among q's "
                           "nearest lists}| / k"}


def not_covered(codes: tuple[str, ...], reason: str) -> dict[str, Any]:
    """The fit record of a build the model does not cover (``predicted_partition`` null)."""
    return {"model": "coarse partition", "codes_covered": list(codes), "reason": reason}


def predict_partition(index: SupportsCoarsePartition, train: np.ndarray, training: str,
                      base: Any, queries: np.ndarray, neighbours: np.ndarray, k: int,
                      target: float, lower: Callable[[np.ndarray], float], eps: float
                      ) -> tuple[int | None, PartitionFit]:
    """The knob at the full N by the partition model (see the module doc): ``index``: an
    unbuilt index of the FULL-N build params; ``train``: the training rows (``training``
    says which); ``base``: the full base (row-indexable, may be memory-mapped);
    ``queries``: the tuning queries; ``neighbours``: their exact full-N ``k`` nearest (base
    row numbers, -1 padded)."""
    t0 = time.perf_counter()
    part: CoarsePartition = index.coarse_partition(train)
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    nn = np.asarray(neighbours[:, :k], dtype=np.int64)
    rows = np.unique(nn[nn >= 0])
    home = part.assign(np.asarray(base[rows]) if rows.size else np.empty((0, queries.shape[1])))
    at = np.clip(np.searchsorted(rows, nn), 0, max(rows.size - 1, 0))
    lists = np.where(nn >= 0, home[at] if rows.size else -1, -1).astype(np.int64)
    per_query = partition_recall(part.rank(queries), lists, k)
    assign_s = time.perf_counter() - t1
    knob, bound = partition_knob(per_query, target, lower, eps)
    recall = None if knob is None else float(per_query[knob - 1].mean())
    return knob, PartitionFit(int(part.nlist), int(part.train_rows), training, train_s,
                              assign_s, int(rows.size), int(queries.shape[0]),
                              tuple(index.partition_codes()), recall, bound)


__all__ = ["PartitionFit", "not_covered", "partition_knob", "partition_recall",
           "predict_partition"]
