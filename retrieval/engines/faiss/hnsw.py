"""HNSW graph index from Faiss (``IndexHNSWFlat``, built with the factory string ``HNSW{M}``).

``ef_search`` travels with each call as ``faiss.SearchParametersHNSW(efSearch=...)``: no
mutable state is shared between calls. Level assignment is drawn from ``seed`` (the HNSW
random generator); with one build thread the build is reproducible (``build_threads`` is set
with ``faiss.omp_set_num_threads`` around the build, ``threads`` for searches). Snapshots are
Faiss's own ``write_index`` / ``read_index`` file. Metrics: ``l2`` (squared
Euclidean), ``ip`` and ``cosine`` (inner product on normalised vectors), converted to rwb
distances by :func:`retrieval.engines.faiss.common.to_result`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.engines.faiss import common as fc
from retrieval.errors import ConfigError
from retrieval.filtering.rows import RowFilter
from retrieval.indexes.base import BuildInfo, CountedSearch, MemoryClaim, SearchResult
from retrieval.indexes.filter_common import InProcessFilter
from retrieval.indexes.hnsw_common import HnswBuild, HnswChecks, HnswSearch
from retrieval.indexes.inprocess import SnapshotIndex
from retrieval.indexes.registry import register
from retrieval.params import Params, validate_params
from retrieval.timing import time_each


@register
class FaissHnswIndex(fc.MappedOpen, InProcessFilter, SnapshotIndex, HnswChecks):
    reads_chunks = True  # a mapped base is fed through base_chunks
    name = "faiss-hnsw"
    bench_defaults = ({"M": 16, "ef_construction": 200}, {"ef_search": 64})
    snapshot_format = "faiss write_index"
    export_engine = "faiss"
    requires = ("faiss",)
    writes_refusal = ("Faiss HNSW cannot remove vectors (IndexHNSW has no remove_ids); use "
                      "hnswlib, faiss-ivf or faiss-flat, or rebuild it on the live set at each "
                      "maintain step")

    _index: Any = None
    _params: Any = None
    _params_for: Any = None

    @classmethod
    def library_version(cls) -> str:
        return fc.version()

    @classmethod
    def factory_string(cls, build: Params) -> str:
        """Faiss ``index_factory`` string of this build, e.g. ``HNSW32`` (the metric is passed
        to the factory separately; ``efConstruction`` is a field set after construction)."""
        assert isinstance(build, HnswBuild)
        return f"HNSW{build.M}"

    @classmethod
    def parameter_space_string(cls, search: Params, build: Params | None = None) -> str:
        """Faiss ``ParameterSpace`` string of these search params, e.g. ``efSearch=64``."""
        assert isinstance(search, HnswSearch)
        return f"efSearch={search.ef_search}"

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        faiss = fc.faiss_module()
        p = self.build_params
        assert isinstance(p, HnswBuild)
        factory = self.factory_string(p)
        index = faiss.index_factory(self.dim, factory, fc.faiss_metric(self.metric))
        index.hnsw.efConstruction = p.ef_construction
        index.hnsw.rng = faiss.RandomGenerator(self.seed)
        with fc.omp_threads(self.build_threads, after=self.threads):
            fc.add_rows(index, x, self.metric)
        self._index = index
        return {"factory": factory, "efConstruction": p.ef_construction}

    @classmethod
    def derived_param(cls) -> str:
        """A smaller ``M`` is derived from a built larger one (same ``ef_construction``)."""
        return "M"

    def derive_from(self, source: Any, base: Any = None) -> BuildInfo:
        """This build (``M`` smaller than ``source``'s, same ``ef_construction``) derived from a
        built :class:`FaissHnswIndex` by pruning its neighbour lists with the HNSW heuristic
        (:mod:`retrieval.engines.faiss.derive`); ``build_s``: the derivation's seconds.
        ``base`` is not needed (the source's storage holds the vectors)."""
        from retrieval.engines.faiss.derive import derive_hnsw

        self._check_open()
        p, q = self.build_params, getattr(source, "build_params", None)
        assert isinstance(p, HnswBuild)
        if (not isinstance(source, FaissHnswIndex) or source._index is None
                or not isinstance(q, HnswBuild) or q.M < p.M
                or q.ef_construction != p.ef_construction):
            raise ConfigError(f"{self._where()}: a derived build needs a built {self.name} "
                              f"with M >= {p.M} and ef_construction {p.ef_construction}")
        if self._built:
            self._release()
        fc.faiss_module().omp_set_num_threads(self.build_threads)
        self._index, seconds = derive_hnsw(source._index, p.M, self.metric,
                                           threads=self.build_threads)
        fc.faiss_module().omp_set_num_threads(self.threads)
        return self._adopt(int(source._index.ntotal), seconds, {
            "factory": self.factory_string(p), "efConstruction": p.ef_construction,
            "derived_from": {"M": q.M, "ef_construction": q.ef_construction}})

    def _save_files(self, folder: Path) -> list[str]:
        return fc.write_index(self._index, folder)

    def _load_files(self, folder: Path, n: int) -> None:
        self._index = fc.read_index(folder, n, self.dim, self.metric, self._where(),
                                   mmap=self._mmap)

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sp = self.search_params
        if self._params_for is not sp:  # one SWIG params object per search config, not per call
            faiss = fc.faiss_module()
            faiss.omp_set_num_threads(self.threads)
            assert isinstance(sp, HnswSearch)
            self._params = faiss.SearchParametersHNSW(efSearch=sp.ef_search)
            self._params_for = sp
        d, i = self._index.search(fc.prepare(x, self.metric), k, params=self._params)
        res = fc.to_result(d, i, self.metric)
        return res.distances, res.ids

    def count_distances(self, queries: np.ndarray, k: int) -> int:
        """Distance computations of one batch search of ``queries`` at the current
        ``ef_search`` (``faiss.cvar.hnsw_stats.ndis``, reset before; a process-wide counter:
        not for concurrent searches)."""
        stats = fc.faiss_module().cvar.hnsw_stats
        stats.reset()
        self._search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return int(stats.ndis)

    def counted_search(
        self, queries: np.ndarray, k: int, search: Mapping[str, Any]
    ) -> CountedSearch:
        """Each query alone, timed (ms), on one thread so that the global
        ``faiss.cvar.hnsw_stats`` counts that query only, with
        ``SearchParametersHNSW(efSearch=search["ef_search"])``; per query the distance
        computations ``hnsw_stats.ndis`` (every level)."""
        sp = validate_params(self.SearchParams, dict(search), where=f"{self.name} search")
        assert isinstance(sp, HnswSearch)
        x = fc.prepare(self._validated_queries(queries, k), self.metric)
        faiss = fc.faiss_module()
        params = faiss.SearchParametersHNSW(efSearch=sp.ef_search)
        stats, index = faiss.cvar.hnsw_stats, self._index

        def one(r: int) -> tuple[Any, Any, int]:
            stats.reset()
            d, i = index.search(x[r : r + 1], k, params=params)
            return d, i, stats.ndis

        faiss.omp_set_num_threads(1)
        try:
            out, ms = time_each(one, range(len(x)), warmup=min(len(x), 8))
        finally:
            faiss.omp_set_num_threads(self.threads)
        res = fc.to_result(np.concatenate([o[0] for o in out]),
                           np.concatenate([o[1] for o in out]), self.metric)
        ids = res.ids if self._ids is None else np.where(
            res.ids >= 0, self._ids[np.maximum(res.ids, 0)], -1)
        ndis = np.array([o[2] for o in out], dtype=np.int64)
        return CountedSearch(SearchResult(ids, res.distances), ndis, ms)

    def _filtered(self, x: np.ndarray, k: int, flt: RowFilter) -> tuple[np.ndarray, np.ndarray]:
        """``SearchParametersHNSW(efSearch, sel=IDSelectorBitmap)``: the graph walk skips
        non-matching ids as results (it still traverses them)."""
        sp = self.search_params
        assert isinstance(sp, HnswSearch)
        faiss = fc.faiss_module()
        sel = fc.faiss_selector(flt)  # kept alive for the call
        params = faiss.SearchParametersHNSW(efSearch=sp.ef_search, sel=sel)
        d, i = self._index.search(fc.prepare(x, self.metric), k, params=params)
        res = fc.to_result(d, i, self.metric)
        return res.distances, res.ids

    def _hot(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
        self._search(np.zeros((1, self.dim), dtype=np.float32), k)  # caches the params object
        return fc.hot_call(self._index, self._params, k, self.metric)

    def memory_claim(self) -> MemoryClaim:
        """float32 vector + layer-0 links (2*M int32) + level and offset bookkeeping."""
        p = self.build_params
        assert isinstance(p, HnswBuild)
        return MemoryClaim(4.0 * self.dim + 8.0 * p.M + 12.0, "Flat (float32)")

    def memory_bytes(self) -> int:
        """Size in bytes of the serialized index (``faiss.serialize_index``): graph plus
        vectors, measured from the built structure."""
        return 0 if self._index is None else fc.serialized_bytes(self._index)

    def _release(self) -> None:
        self._index = None
