"""Qdrant's native segments (:class:`~retrieval.indexes.base.SupportsNativeSegments`): one
``EdgeShard`` whose points Qdrant keeps in N segments of its own, each with its own HNSW graph,
searched and merged by Qdrant. Made with Qdrant's optimizer settings: the shard's
``default_segment_number`` is N and the points are upserted in N equal slices, the optimizer run
to completion after each (each slice becomes one indexed segment, and the merge optimizer keeps
N). Checked with qdrant-edge-py 0.9.0 on 8,000 x 32: 8 and 32 slices gave 8 and 32 segments
(``default_segment_number`` alone, or ``max_segment_size``, gave 2 after one optimize).

``merge_segments`` is Qdrant's optimize as a force-merge: the shard reloaded with
``default_segment_number`` 1 (``EdgeShard.load(path, config)`` rewrites the config) and optimized
to completion, so the merge optimizer merges the segments (Qdrant keeps 2: an indexed one and its
appendable one, as a 1-segment build does). The count Qdrant reports (``ShardInfo.
segments_count``) is what ``segment_count`` returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.errors import BackendError, ConfigError
from retrieval.indexes.base import MaintainInfo

#: one optimize per segment at build: keep it sane
MAX_SEGMENTS = 1024


class QdrantSegments:
    """Mixin of :class:`~retrieval.engines.qdrant.index.QdrantIndex` (``self._shard``,
    ``self._dir``, ``self._where`` from it)."""

    segments_note = ("Qdrant segments of one shard (default_segment_number N, one indexed "
                     "segment per upserted slice), each with its own HNSW graph; Qdrant searches "
                     "every segment and merges")
    _segments = 1
    _shard: Any
    _dir: Path | None

    if TYPE_CHECKING:  # QdrantIndex's
        def _where(self) -> str: ...

        def _config(self, segments: int) -> Any: ...

    def set_segments(self, n: int) -> None:
        """Build the next shard as ``n`` Qdrant segments (1: rwb's usual single segment)."""
        if not 1 <= int(n) <= MAX_SEGMENTS:
            raise ConfigError(f"{self._where()}: segments must be in [1, {MAX_SEGMENTS}]; "
                              f"received {n}")
        self._segments = int(n)

    def _upsert_parts(self, shard: Any, n: int, upsert: Callable[[int, int], None]) -> None:
        """Upsert rows [0, n) by ``upsert(start, stop)``: with N segments in N slices, the
        optimizer run after each; else in one go (optimized by the caller)."""
        if self._segments <= 1:
            upsert(0, n)
            return
        edges = np.linspace(0, n, self._segments + 1).round().astype(int).tolist()
        for j in range(self._segments):
            upsert(edges[j], edges[j + 1])
            shard.optimize()

    def segment_count(self) -> int | None:
        """The segments Qdrant reports for the shard (``ShardInfo.segments_count``)."""
        if self._shard is None:
            return None
        return int(self._shard.info().segments_count)

    def merge_segments(self) -> MaintainInfo:
        """Force-merge: the shard reloaded with ``default_segment_number`` 1 and optimized to
        completion (timed); the count before and after."""
        import qdrant_edge as q

        if self._shard is None or self._dir is None:
            raise ConfigError(f"{self._where()}: merge_segments() called before build()")
        before = self.segment_count()
        t0 = time.perf_counter_ns()
        try:
            self._shard.close()
            self._shard = None
            self._shard = q.EdgeShard.load(str(self._dir / "shard"), self._config(1))
            self._shard.optimize()
        except Exception as exc:
            raise BackendError(f"{self._where()}: the merge failed ({type(exc).__name__}: "
                               f"{str(exc)[:300]})") from None
        seconds = (time.perf_counter_ns() - t0) / 1e9
        self._segments = 1
        return MaintainInfo("optimize with default_segment_number 1 (merge)", seconds, {
            "segments_before": before, "segments_after": self.segment_count()})


__all__ = ["MAX_SEGMENTS", "QdrantSegments"]
