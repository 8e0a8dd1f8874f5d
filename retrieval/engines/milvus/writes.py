"""Milvus writes (:class:`~retrieval.indexes.base.SupportsWrites`): inserts and deletes under
the caller's int64 ids (the primary key itself, no mapping), ``maintain`` = flush + compact +
index coverage of the live rows. Not a backend module: a mixin of
:class:`retrieval.engines.milvus.index.MilvusIndex` (its module doc says what Milvus does with
each write). Times are in seconds."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.data import as_matrix
from retrieval.engines.milvus.common import PK, VEC, WHERE
from retrieval.errors import BackendError, ConfigError, DataError
from retrieval.indexes.base import MaintainInfo


class MilvusWrites:
    """Mixin: the writes of :class:`~retrieval.engines.milvus.index.MilvusIndex`."""

    _closed: bool
    _attrs: Any
    _built_n: int
    _client: Any
    _live: set[int] | None
    _build_ids: np.ndarray | None
    collection: str
    dim: int
    insert_batch: int
    index_timeout_s: float

    if TYPE_CHECKING:  # provided by MilvusConnection / MilvusIndex
        def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any: ...
        def _drain_lite_background(self) -> bool: ...
        def _wait_indexed(self, n: int) -> dict[str, Any]: ...

    def cannot_write(self) -> str | None:
        if self._attrs is not None:
            return "its build carries attributes for filtered search (inserts would have none)"
        return None

    def _writable(self, what: str) -> set[int]:
        if self._closed:
            raise BackendError(f"{WHERE}: index is closed")
        if not self._built_n or self._client is None:
            raise ConfigError(f"{WHERE}: {what} called before build()")
        reason = self.cannot_write()
        if reason:
            raise ConfigError(f"{WHERE} {what}: {reason}")
        if self._live is None:
            assert self._build_ids is not None
            self._live = set(self._build_ids.tolist())
        return self._live

    def insert(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add ``vectors`` (m, dim) under the caller's ``ids`` (primary keys, none live)."""
        from retrieval.indexes.writes import check_write_ids

        live = self._writable("insert")
        x = as_matrix(vectors, f"{WHERE} insert vectors", dim=self.dim)
        new = check_write_ids(ids, x.shape[0], f"{WHERE} insert")
        dup = [v for v in new.tolist() if v in live]
        if dup:
            raise DataError(f"{WHERE} insert: id {dup[0]} is already in the index ({len(dup)} "
                            f"of the {len(new)} ids are); delete it first")
        batch = self.insert_batch
        for s in range(0, new.shape[0], batch):
            rows = [{PK: i, VEC: v} for i, v in zip(new[s:s + batch].tolist(), x[s:s + batch])]
            self._call("insert", self._client.insert, self.collection, rows)
        live.update(new.tolist())

    def delete(self, ids: np.ndarray) -> None:
        """Remove the live ``ids`` (primary keys); a deleted id is never returned again."""
        from retrieval.indexes.writes import check_write_ids

        live = self._writable("delete")
        arr = np.asarray(ids)
        if arr.ndim != 1:
            raise DataError(f"{WHERE} delete: ids must be a 1-d array; received shape "
                            f"{arr.shape}")
        gone = check_write_ids(arr, arr.shape[0], f"{WHERE} delete")
        missing = [v for v in gone.tolist() if v not in live]
        if missing:
            raise DataError(f"{WHERE} delete: id {missing[0]} is not in the index "
                            f"({len(missing)} of the {len(gone)} ids are not)")
        if gone.shape[0]:
            self._call("delete", self._client.delete, self.collection, ids=gone.tolist())
        live.difference_update(gone.tolist())

    def maintain(self) -> MaintainInfo:
        """``flush`` + ``compact`` (waited for) + index coverage of the live rows (seconds)."""
        live = self._writable("maintain")
        client = self._client
        t0 = time.perf_counter_ns()
        self._call("flush", client.flush, self.collection)
        job = self._call("compact", client.compact, self.collection)
        state = "Completed"
        deadline = time.perf_counter() + self.index_timeout_s
        while True:
            state = str(self._call("get_compaction_state", client.get_compaction_state, job))
            if state.lower().endswith(("completed", "undefined")) or \
                    time.perf_counter() > deadline:
                break
            time.sleep(0.02)
        self._drain_lite_background()
        self._wait_indexed(len(live))
        seconds = (time.perf_counter_ns() - t0) / 1e9
        return MaintainInfo("flush+compact", seconds, {"compaction": state,
                                                         "live": len(live)})

    def live_count(self) -> int:
        """Live rows: built + inserted - deleted."""
        if not self._built_n:
            raise ConfigError(f"{WHERE}: live_count() called before build()")
        return self._built_n if self._live is None else len(self._live)


__all__ = ["MilvusWrites"]
