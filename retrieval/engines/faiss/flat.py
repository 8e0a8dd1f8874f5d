"""Exact search with Faiss IndexFlat: the baseline every approximate backend is compared with.

Writes (:class:`~retrieval.indexes.base.SupportsWrites`): the first write moves the vectors
into an ``IndexIDMap2`` over a new ``IndexFlat`` labelled by slot (``IndexFlat.remove_ids``
alone would renumber the rows that follow), then inserts are ``add_with_ids`` and deletes
``remove_ids`` (the rows are gone at once: nothing to maintain). An exact control under churn:
recall 1.0 at every step.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.data import as_matrix
from retrieval.engines.faiss import common as fc
from retrieval.errors import ConfigError
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter
from retrieval.indexes.base import BuildInfo, IndexBackend, MemoryClaim, SearchResult
from retrieval.indexes.inprocess import check_ids, check_k
from retrieval.indexes.portable import Flat
from retrieval.indexes.registry import register
from retrieval.indexes.writes import SlotWrites
from retrieval.params import Params


class FlatBuild(Params):
    pass


class FlatSearch(Params):
    pass


@register
class FaissFlatIndex(SlotWrites, IndexBackend):
    name = "faiss-flat"
    export_engine = "faiss"
    family = "flat"
    BuildParams = FlatBuild
    SearchParams = FlatSearch
    requires = ("faiss",)

    _index: Any = None
    _inner: Any = None
    _ids: np.ndarray | None = None

    @classmethod
    def library_version(cls) -> str:
        return fc.version()

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Flat:
        """Export mapping: exact search."""
        return Flat()

    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> BuildInfo:
        faiss = fc.faiss_module()
        faiss.omp_set_num_threads(self.threads)
        x = as_matrix(vectors, "faiss-flat build vectors", dim=self.dim, mapped=True)  # add_rows
        checked_ids = None if ids is None else check_ids(ids, len(x), "faiss-flat build")
        t0 = time.perf_counter_ns()
        index = faiss.IndexFlatL2(self.dim) if self.metric == "l2" else faiss.IndexFlatIP(self.dim)
        fc.add_rows(index, x, self.metric)
        build_s = (time.perf_counter_ns() - t0) / 1e9
        self._index, self._inner = index, None
        self._ids = checked_ids
        return BuildInfo(n=len(x), build_s=build_s, memory_bytes=self.memory_bytes())

    def memory_claim(self) -> MemoryClaim:
        """The float32 vectors, nothing else."""
        return MemoryClaim(4.0 * self.dim, "Flat (float32)")

    def memory_bytes(self) -> int:
        return fc.serialized_bytes(self._index)

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        if self._index is None:
            raise ConfigError("faiss-flat: search() called before build()")
        k = check_k(k, "faiss-flat search")
        queries = as_matrix(queries, "faiss-flat queries", dim=self.dim)
        d, i = self._index.search(fc.prepare(queries, self.metric), k)
        if self._ids is not None:
            i = np.where(i >= 0, self._ids[np.maximum(i, 0)], -1)
        return fc.to_result(d, i, self.metric)

    def attach_attributes(self, attrs: Attributes) -> None:
        """Filters travel as row masks: nothing to store (SupportsFilter)."""

    def filtered_search(self, queries: np.ndarray, k: int, flt: RowFilter) -> SearchResult:
        """Exact top-k among the rows ``flt`` matches (``SearchParameters(sel=...)``)."""
        if self._index is None:
            raise ConfigError("faiss-flat: search() called before build()")
        if self._ids is not None or flt.mask.shape[0] != self._index.ntotal:
            raise ConfigError(f"faiss-flat: the filter must cover the {self._index.ntotal} rows "
                              f"of an index built without custom ids")
        k = check_k(k, "faiss-flat search")
        queries = as_matrix(queries, "faiss-flat queries", dim=self.dim)
        sel = fc.faiss_selector(flt)  # kept alive for the call
        params = fc.faiss_module().SearchParameters(sel=sel)
        d, i = self._index.search(fc.prepare(queries, self.metric), k, params=params)
        return fc.to_result(d, i, self.metric)

    def close(self) -> None:
        self._index = None
        super().close()

    # --- writes (SlotWrites hooks) -------------------------------------------------------------
    def _built_count(self) -> int:
        return int(self._index.ntotal)

    def _check_writable(self) -> None:
        if self._index is None:
            raise ConfigError("faiss-flat: insert/delete called before build() or after close()")

    def _id_mapped(self) -> Any:
        """The index as ``IndexIDMap2`` labelled by slot (converted on the first write)."""
        faiss = fc.faiss_module()
        if not isinstance(self._index, faiss.IndexIDMap2):
            n = int(self._index.ntotal)
            inner = (faiss.IndexFlatL2(self.dim) if self.metric == "l2"
                     else faiss.IndexFlatIP(self.dim))
            mapped = faiss.IndexIDMap2(inner)
            if n:
                mapped.add_with_ids(self._index.reconstruct_n(0, n), np.arange(n, dtype=np.int64))
            self._index, self._inner = mapped, inner  # the map does not own inner
        return self._index

    def _insert_rows(self, x: np.ndarray, slots: np.ndarray) -> None:
        self._id_mapped().add_with_ids(fc.prepare(x, self.metric), slots)

    def _delete_rows(self, slots: np.ndarray) -> None:
        removed = int(self._id_mapped().remove_ids(np.ascontiguousarray(slots, dtype=np.int64)))
        if removed != slots.shape[0]:
            raise RuntimeError(f"faiss-flat: removed {removed} of {slots.shape[0]} vectors")
