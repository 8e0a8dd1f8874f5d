"""Exact search with Faiss IndexFlat: the baseline every approximate backend is compared with."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.data import as_matrix
from retrieval.errors import ConfigError
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.workload import RowFilter
from retrieval.indexes import faiss_common as fc
from retrieval.indexes.base import BuildInfo, IndexBackend, MemoryClaim, SearchResult
from retrieval.indexes.filter_common import faiss_selector
from retrieval.indexes.inprocess import check_ids, check_k
from retrieval.indexes.portable import Flat
from retrieval.indexes.registry import register
from retrieval.params import Params


class FlatBuild(Params):
    pass


class FlatSearch(Params):
    pass


@register
class FaissFlatIndex(IndexBackend):
    name = "faiss-flat"
    export_engine = "faiss"
    family = "flat"
    BuildParams = FlatBuild
    SearchParams = FlatSearch
    requires = ("faiss",)

    _index: Any = None
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
        x = fc.prepare(as_matrix(vectors, "faiss-flat build vectors", dim=self.dim), self.metric)
        checked_ids = None if ids is None else check_ids(ids, len(x), "faiss-flat build")
        t0 = time.perf_counter_ns()
        index = faiss.IndexFlatL2(self.dim) if self.metric == "l2" else faiss.IndexFlatIP(self.dim)
        index.add(x)
        build_s = (time.perf_counter_ns() - t0) / 1e9
        self._index = index
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
        sel = faiss_selector(flt)  # kept alive for the call
        params = fc.faiss_module().SearchParameters(sel=sel)
        d, i = self._index.search(fc.prepare(queries, self.metric), k, params=params)
        return fc.to_result(d, i, self.metric)

    def close(self) -> None:
        self._index = None
        super().close()
