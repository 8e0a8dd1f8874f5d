"""Topology as a workload dimension: the same data built as N segments (issue 31, item 1).

Production collections are searched as many segments (shards, fragments) whose top-k are merged;
rwb's lab index is one graph unless a spec says ``topology: {segments: [1, 4, 16, 64]}``. This
module holds the pure parts: the seeded split of the base into segments (the caller's ids kept:
each segment's rows are positions in the base, and results are mapped back to those positions),
the merge of per-segment top-k (by distance, rwb convention: lower is closer), a
:class:`SegmentedIndex` over any in-process backend, the per-segment knob rule (the knob as a
function of the segment size, fitted like the scale study's knob(N)) and the comparison of the
lab's segment count with a real collection's.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from retrieval.indexes.base import SearchResult, SupportsNativeSegments, VectorIndex
from retrieval.tune import scale as sc

log = logging.getLogger(__name__)

#: segment counts a spec may ask for (each segment must hold at least k vectors)
MAX_SEGMENTS = 4096


class TopologySpec(BaseModel):
    """``topology:`` of a sweep spec.

    - ``segments``: segment counts to build the same data as (each >= 1; 1 is one graph);
    - ``maintain``: measure the recall change of a force-merge (the segments merged into one
      graph, searched at each topology's chosen knob; an engine with native segments runs its
      own: LanceDB ``optimize()``, pgvector ``VACUUM`` + ``REINDEX``);
    - ``native``: an engine with native segments (pgvector partitions, LanceDB fragments) uses
      them (False: independent indexes, N shards, as for in-process backends);
    - ``collection_segments``: the segment count of the real (attached or exported) collection,
      compared with the lab's (a warning when it is not among them);
    - ``collection``: a ``live:`` section naming that collection (``rwb export`` attaches it,
      read-only, and takes its count from ``describe().segments``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    segments: list[int] = Field(min_length=1)
    maintain: bool = True
    native: bool = True
    collection_segments: int | None = Field(None, ge=1)
    collection: dict[str, Any] | None = None

    @field_validator("segments")
    @classmethod
    def _counts(cls, v: list[int]) -> list[int]:
        bad = [s for s in v if not 1 <= s <= MAX_SEGMENTS]
        if bad:
            raise ValueError(f"each segment count must be in [1, {MAX_SEGMENTS}]; "
                             f"received {bad[0]}")
        return sorted(set(v))


def split_rows(n: int, segments: int, seed: int) -> list[np.ndarray]:
    """A seeded split of base rows ``0..n-1`` into ``segments`` parts of near-equal size (each
    sorted ascending: positions in the base, so the caller's ids stay with their rows)."""
    if not 1 <= segments <= n:
        raise ValueError(f"segments must be in [1, {n}]; received {segments}")
    perm = np.random.default_rng(seed).permutation(n)
    return [np.sort(part).astype(np.int64) for part in np.array_split(perm, segments)]


def merge_topk(parts: Sequence[tuple[np.ndarray, np.ndarray]], k: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-segment results ``(ids, distances)`` (ids already global, -1 = none;
    distances ascending, lower is closer) into the global top-``k``: ids int64 (nq, k) and
    distances float32 (nq, k), -1 / +inf padded. Ties keep the segment order (stable sort)."""
    ids = np.concatenate([np.asarray(p[0], dtype=np.int64) for p in parts], axis=1)
    dist = np.concatenate([np.asarray(p[1], dtype=np.float64) for p in parts], axis=1)
    dist = np.where(ids < 0, np.inf, dist)
    order = np.argsort(dist, axis=1, kind="stable")[:, :k]
    out_ids = np.take_along_axis(ids, order, axis=1)
    out_d = np.take_along_axis(dist, order, axis=1)
    if out_ids.shape[1] < k:  # fewer results than k in all segments together
        pad = k - out_ids.shape[1]
        out_ids = np.pad(out_ids, ((0, 0), (0, pad)), constant_values=-1)
        out_d = np.pad(out_d, ((0, 0), (0, pad)), constant_values=np.inf)
    out_ids = np.where(np.isfinite(out_d), out_ids, -1)
    return out_ids, out_d.astype(np.float32)


class SegmentedIndex:
    """N independent indexes of one backend over a split of the base, searched with the same
    search params each, their top-k merged. ``factory()`` makes one unbuilt index; ``workers``
    > 1 searches the segments in parallel threads (the libraries release the GIL), 1 one after
    another."""

    def __init__(self, factory: Callable[[], VectorIndex], rows: Sequence[np.ndarray],
                 workers: int = 1) -> None:
        self.rows = [np.asarray(r, dtype=np.int64) for r in rows]
        self.parts = [factory() for _ in self.rows]
        self.build_s = 0.0
        self._pool = (ThreadPoolExecutor(workers, thread_name_prefix="rwb-segment")
                      if workers > 1 and len(self.parts) > 1 else None)

    @property
    def segments(self) -> int:
        return len(self.parts)

    def build(self, base: np.ndarray) -> float:
        """Build every segment from its rows of ``base``; returns the build time in s."""
        t0 = time.perf_counter()
        for idx, rows in zip(self.parts, self.rows, strict=True):
            idx.build(np.ascontiguousarray(base[rows]))
        self.build_s = time.perf_counter() - t0
        return self.build_s

    def set_search_params(self, **params: Any) -> None:
        for idx in self.parts:
            idx.set_search_params(**params)

    def search_segments(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each segment's own top-``min(k, its size)``, ids mapped to base positions."""

        def one(j: int) -> tuple[np.ndarray, np.ndarray]:
            rows = self.rows[j]
            res = self.parts[j].search(queries, min(k, rows.size))
            local = np.asarray(res.ids, dtype=np.int64)
            glob = np.where(local >= 0, rows[np.clip(local, 0, rows.size - 1)], -1)
            return glob, np.asarray(res.distances)

        if self._pool is not None:
            return list(self._pool.map(one, range(len(self.parts))))
        return [one(j) for j in range(len(self.parts))]

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        ids, dist = merge_topk(self.search_segments(queries, k), k)
        return SearchResult(ids, dist)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for idx in self.parts:
            idx.close()


class NativeSegmented:
    """One index of an engine with native segments
    (:class:`~retrieval.indexes.base.SupportsNativeSegments`: pgvector partitions, LanceDB
    fragments) built as ``segments`` of its own; the engine searches and merges them. The same
    surface as :class:`SegmentedIndex`; ``reported`` is the count the engine reports."""

    def __init__(self, index: VectorIndex, segments: int) -> None:
        if not isinstance(index, SupportsNativeSegments):
            raise TypeError(f"{type(index).__name__} has no native segments")
        self.index: Any = index
        self.native: SupportsNativeSegments = index
        self._segments = segments
        self.reported: int | None = None
        self.build_s = 0.0
        index.set_segments(segments)

    @property
    def segments(self) -> int:
        return self._segments

    @property
    def note(self) -> str:
        return str(self.native.segments_note)

    def build(self, base: np.ndarray) -> float:
        """Build over all of ``base`` (ids: base positions); the build time in s."""
        t0 = time.perf_counter()
        self.index.build(base)
        self.build_s = time.perf_counter() - t0
        self.reported = self.native.segment_count()
        return self.build_s

    def set_search_params(self, **params: Any) -> None:
        self.index.set_search_params(**params)

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        res = self.index.search(queries, k)
        return SearchResult(np.asarray(res.ids), np.asarray(res.distances))

    def merge(self) -> dict[str, Any]:
        """The engine's force-merge / optimize: what it did (action, seconds, segments
        after)."""
        info = self.native.merge_segments()
        return {"step": info.action, "seconds": info.seconds, **info.extra}

    def close(self) -> None:
        self.index.close()


# --- the per-segment knob rule ---------------------------------------------------------------
@dataclass(frozen=True)
class SegmentRule:
    """The knob as a function of the segment size n_seg = N / segments (fitted on the topologies
    whose knob was found): ``fit`` of the scale study's models (log or power)."""

    fit: sc.Fit
    n: int
    holdout_error: dict[str, float | None]

    def predict(self, segments: int, low: int, high: int) -> int:
        """The rule's knob for ``segments`` segments of the ``n`` base vectors, clipped to the
        knob range."""
        v = self.fit.predict(max(self.n / segments, 1.0))
        return int(min(max(math.ceil(v - 1e-9), low), high))

    def to_dict(self) -> dict[str, Any]:
        return {**self.fit.to_dict(), "variable": "segment size N/segments",
                "holdout_error": self.holdout_error,
                "formula": self.fit.describe().replace("N", "n_seg")}


def fit_segment_rule(n: int, segments: Sequence[int], knobs: Sequence[int | None]
                     ) -> SegmentRule | None:
    """Fit knob(n_seg) on the topologies with a knob (None: fewer than one)."""
    pts = [(n / s, k) for s, k in zip(segments, knobs, strict=True) if k is not None]
    if not pts:
        return None
    xs, ys = [p[0] for p in pts], [float(p[1]) for p in pts]
    f, errors = sc.choose_fit(xs, ys)
    return SegmentRule(f, n, errors)


def compare_segments(lab: Sequence[int], real: int | None, where: str) -> str | None:
    """A warning line when a real collection's segment count is not among the lab's."""
    if real is None or real in lab:
        return None
    msg = (f"{where}: the collection has {real} segments but the lab measured "
           f"{', '.join(map(str, lab))}: the knob found here may not transfer (add {real} to "
           f"'topology.segments')")
    log.warning("%s", msg)
    return msg


__all__ = ["MAX_SEGMENTS", "NativeSegmented", "SegmentRule", "SegmentedIndex", "TopologySpec",
           "compare_segments", "fit_segment_rule", "merge_topk", "split_rows"]
