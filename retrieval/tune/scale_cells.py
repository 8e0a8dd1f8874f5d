"""``scale.sampling: cells``: samples made of WHOLE k-means cells, so every region a sample keeps
has the full collection's local density.

A uniform sample thins every cluster: on clustered data the small samples are much easier than
the full N, and no law of N fitted on them extrapolates (docs/scale.md). Here the base is
partitioned into ``C`` cells by k-means (Faiss, trained on a seeded sample of the base; the
rule: :func:`cell_count`), the cells are put in ONE seeded order (cells that are the home of
more tuning queries first, so the smallest sample still judges enough of them) and each sample
is the shortest prefix of that order whose rows come closest to the size asked: the samples
are nested, made of complete cells, and grow by adding regions.

A tuning query is judged at a sample (:func:`judged`) when its full-N ``k`` nearest
neighbours all lie in the sample's cells (rule ``knn``: its exact answer in the sample is its
full-N answer), or when its home cell (nearest centroid) is in (rule ``home``). Each sample's
search, lower bound and fits use only its own judged queries.

It uses only what a scale study may use before its prediction: the base (k-means) and the
full-N exact ground truth the check at the full N computes anyway; no full-N index is searched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from retrieval.data import VectorDataset, base_chunks, normalize_rows, take_rows

log = logging.getLogger(__name__)

#: bounds of the number of cells, and how many whole cells the smallest sample should hold
CELLS_MIN, CELLS_MAX, CELLS_IN_SMALLEST = 16, 4096, 4
#: k-means training rows per cell (a seeded sample of the base; Faiss advises >= 39)
TRAIN_PER_CELL = 64
#: k-means iterations
NITER = 20
CELL_RULE = (f"C = clamp(round({CELLS_IN_SMALLEST} * N / smallest sample), {CELLS_MIN}, "
             f"{CELLS_MAX}): the smallest sample holds about {CELLS_IN_SMALLEST} whole cells")

QueryRule = Literal["knn", "home"]
#: the rule a scale study uses to say which tuning queries a sample judges (docs/scale.md)
QUERY_RULE: QueryRule = "knn"


def cell_count(n: int, smallest: int) -> int:
    """The number of cells ``C`` for ``n`` base vectors whose smallest sample has ``smallest``
    rows (:data:`CELL_RULE`; at most ``n``)."""
    c = round(CELLS_IN_SMALLEST * n / max(1, smallest))
    return int(min(n, max(CELLS_MIN, min(CELLS_MAX, c))))


@dataclass(frozen=True)
class Cells:
    """A partition of the base: ``of_row[i]`` is the cell of base row ``i`` (int64, in
    ``0..count-1``); ``home[q]``: the cell whose centroid is nearest query ``q`` (all queries)."""

    count: int
    of_row: np.ndarray
    home: np.ndarray

    def sizes(self) -> np.ndarray:
        return np.bincount(self.of_row, minlength=self.count)


def _prepare(x: np.ndarray, metric: str) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    return normalize_rows(x) if metric == "cosine" else x


def kmeans_cells(ds: VectorDataset, count: int, seed: int) -> Cells:
    """k-means of the base into ``count`` cells (Faiss, trained on a seeded sample of at most
    ``TRAIN_PER_CELL * count`` rows; cosine rows L2-normalised), every base row assigned to its
    nearest centroid one chunk at a time, and each query's home cell."""
    import faiss

    n, d = ds.n_base, int(ds.base.shape[1])
    rng = np.random.default_rng(seed)
    train_n = min(n, TRAIN_PER_CELL * count)
    rows = np.sort(rng.choice(n, size=train_n, replace=False)).astype(np.int64)
    train = _prepare(take_rows(ds.base, rows), ds.metric)
    km = faiss.Kmeans(d, count, niter=NITER, seed=int(seed) % (2**31), verbose=False,
                      min_points_per_centroid=1, max_points_per_centroid=TRAIN_PER_CELL * 4)
    km.train(train)
    flat = faiss.IndexFlatL2(d)
    flat.add(np.ascontiguousarray(km.centroids, dtype=np.float32))
    of_row = np.empty(n, dtype=np.int64)
    for lo, chunk in base_chunks(ds):
        _, nearest = flat.search(chunk, 1)
        of_row[lo:lo + chunk.shape[0]] = nearest[:, 0]
    _, home = flat.search(_prepare(np.asarray(ds.queries), ds.metric), 1)
    return Cells(count, of_row, home[:, 0].astype(np.int64))


def cell_order(count: int, home_of_tuning: np.ndarray, seed: int) -> np.ndarray:
    """ONE seeded order of the cells: those that are the home of more tuning queries first
    (ties, and cells with none, in seeded random order). By count, not per row: measured, an
    order by queries per row picks small fragments of clusters first, whose queries' nearest
    spill into other cells (1 query judged instead of 8 on the unit test's blobs)."""
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(count)
    held = np.bincount(np.asarray(home_of_tuning, dtype=np.int64), minlength=count)
    return shuffled[np.argsort(-held[shuffled], kind="stable")].astype(np.int64)


def prefix_lengths(cell_sizes: np.ndarray, order: np.ndarray, sizes: Sequence[int]) -> list[int]:
    """How many cells of ``order`` each sample takes: the prefix whose rows come closest to
    the size asked, at least one cell more than the previous sample's and fewer than all
    (ValueError when the cells are too few for distinct samples)."""
    cum = np.cumsum(cell_sizes[order])
    out: list[int] = []
    for s in sorted(int(x) for x in sizes):
        p = int(np.argmin(np.abs(cum - s))) + 1
        p = max(p, out[-1] + 1 if out else 1)
        out.append(p)
    if out and out[-1] >= len(order):
        raise ValueError(f"{len(order)} cells cannot make {len(out)} distinct nested samples "
                         f"below the full N (sizes asked {sorted(sizes)})")
    return out


def cell_samples(cells: Cells, order: np.ndarray, sizes: Sequence[int]
                 ) -> tuple[list[np.ndarray], list[int]]:
    """The rows of each sample (sorted int64, nested, whole cells) and the cells each takes."""
    lengths = prefix_lengths(cells.sizes(), order, sizes)
    rank = np.empty(cells.count, dtype=np.int64)
    rank[order] = np.arange(cells.count)
    row_rank = rank[cells.of_row]
    return [np.flatnonzero(row_rank < p).astype(np.int64) for p in lengths], lengths


def judged(neighbours: np.ndarray, home: np.ndarray, kept: np.ndarray, of_row: np.ndarray,
           rule: QueryRule = QUERY_RULE) -> np.ndarray:
    """Which tuning queries a sample judges (bool per row of ``neighbours``): rule ``knn``,
    every one of its full-N nearest (``neighbours``: base rows, -1 padded) lies in a kept cell
    (``kept``: bool per cell); rule ``home``, its home cell is kept."""
    if rule == "home":
        return np.asarray(kept[home], dtype=bool)
    nb = np.asarray(neighbours)
    inside = np.where(nb >= 0, kept[of_row[np.maximum(nb, 0)]], True)
    return np.asarray(inside.all(axis=1), dtype=bool)


@dataclass(frozen=True)
class CellPlan:
    """The samples of ``sampling: cells``: rows per sample, the positions (in the tuning
    queries) each judges, and what the summary says (``scale.cells``)."""

    rows: list[np.ndarray]
    queries: list[np.ndarray]
    summary: dict[str, Any]


def plan_cells(ds: VectorDataset, sizes: Sequence[int], seed: int, tune: np.ndarray,
               neighbours: np.ndarray, rule: QueryRule = QUERY_RULE) -> CellPlan:
    """Cells, their order and the samples for a study over ``ds`` with sample ``sizes``;
    ``tune``: the tuning queries' rows; ``neighbours``: their full-N exact neighbour rows. A
    sample where the rule judges no query falls back to rule ``home`` (said per sample)."""
    count = cell_count(ds.n_base, min(sizes))
    cells = kmeans_cells(ds, count, seed)
    home = cells.home[tune]
    order = cell_order(count, home, seed)
    rows, lengths = cell_samples(cells, order, sizes)
    queries, per_sample = [], []
    for r, p in zip(rows, lengths, strict=True):
        kept = np.zeros(count, dtype=bool)
        kept[order[:p]] = True
        used: QueryRule = rule
        mask = judged(neighbours, home, kept, cells.of_row, rule)
        if not mask.any() and rule != "home":
            used, mask = "home", judged(neighbours, home, kept, cells.of_row, "home")
            log.warning("scale.sampling cells: no tuning query has all its %d nearest in the "
                        "sample of %d rows; it judges those whose home cell is in",
                        neighbours.shape[1], r.size)
        queries.append(np.flatnonzero(mask).astype(np.int64))
        per_sample.append({"n": int(r.size), "cells": int(p), "tuning_queries": int(mask.sum()),
                           "query_rule": used})
    summary = {"count": count, "rule": CELL_RULE, "query_rule": rule,
               "query_rules": {"knn": "every one of the query's full-N k nearest lies in the "
                                      "sample's cells",
                               "home": "the query's nearest centroid's cell is in the sample"},
               "tuning_queries": int(tune.size), "samples": per_sample}
    return CellPlan(rows, queries, summary)


__all__ = ["CELL_RULE", "QUERY_RULE", "CellPlan", "Cells", "cell_count", "cell_order",
           "cell_samples", "judged", "kmeans_cells", "plan_cells", "prefix_lengths"]
