"""HNSW graph index from hnswlib (https://github.com/nmslib/hnswlib).

Metrics map to hnswlib spaces: ``l2`` -> 'l2' (squared Euclidean, as rwb), ``ip`` -> 'ip'
(hnswlib returns ``1 - <x, q>``; converted to rwb's ``-<x, q>``), ``cosine`` -> 'cosine'
(hnswlib returns ``1 - cos``, as rwb). The build is reproducible for a fixed ``seed``
(hnswlib ``random_seed = seed + 1``, which draws node levels: its ``std::minstd_rand``
generator treats seed 0 as 1, so passing ``seed`` unchanged would make seeds 0 and 1 build the
same graph) with ``threads=1``; with more threads the insertion order, hence the graph, varies.
The build uses ``build_threads`` (``add_items(num_threads=)``), searches ``threads``. Snapshots
are hnswlib's own ``save_index`` / ``load_index`` file.

Writes (:class:`~retrieval.indexes.base.SupportsWrites`): a delete is ``mark_deleted`` (the
node stays in the graph as a waypoint, never returned); an insert first takes the slots of
deleted nodes (``add_items(replace_deleted=True)``, the index is made with
``allow_replace_deleted``), and the index is resized (``resize_index``) when it is full.
hnswlib has no vacuum: ``maintain`` does nothing; ``dead_fraction`` is the marked-deleted
nodes not yet replaced over the nodes held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import base_chunks, is_out_of_core
from retrieval.errors import ConfigError, DataError
from retrieval.filtering.rows import RowFilter
from retrieval.indexes.base import MemoryClaim
from retrieval.indexes.filter_common import InProcessFilter, pad
from retrieval.indexes.hnsw_common import HnswBuild, HnswChecks, HnswSearch
from retrieval.indexes.inprocess import SnapshotIndex
from retrieval.indexes.registry import package_version, register
from retrieval.indexes.writes import SnapshotSlotWrites

log = logging.getLogger(__name__)

_SPACES = {"l2": "l2", "ip": "ip", "cosine": "cosine"}


@register
class HnswlibIndex(SnapshotSlotWrites, InProcessFilter, SnapshotIndex, HnswChecks):
    reads_chunks = True  # a mapped base is fed through base_chunks
    name = "hnswlib"
    bench_defaults = ({"M": 16, "ef_construction": 200}, {"ef_search": 64})
    snapshot_format = "hnswlib save_index"
    export_engine = "hnswlib"
    requires = ("hnswlib",)

    _index: Any = None

    @classmethod
    def library_version(cls) -> str:
        import hnswlib  # noqa: F401  (fails here if the extension is broken)

        return package_version("hnswlib")

    @classmethod
    def expected_memory_bytes(cls, build: Any, n: int, dim: int) -> int:
        """hnswlib's layout: per element the float32 vector, 2*M level-0 links (4 bytes each),
        a label (8) and a link count (4), plus upper levels (~1/M of the elements, M links
        each); 10% headroom for the visited lists and the allocator."""
        assert isinstance(build, HnswBuild)
        per = dim * 4 + 2 * build.M * 4 + 12 + (build.M * 4 + 8) // max(build.M, 1)
        return int(n * per * 1.1)

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        import hnswlib

        p = self.build_params
        assert isinstance(p, HnswBuild)
        index = hnswlib.Index(space=_SPACES[self.metric], dim=self.dim)
        index.init_index(
            max_elements=x.shape[0], M=p.M, ef_construction=p.ef_construction,
            random_seed=self.seed + 1,  # minstd_rand maps 0 to 1: keep seeds 0 and 1 apart
            allow_replace_deleted=True,  # inserts may reuse deleted slots (build unchanged)
        )
        if is_out_of_core(x):  # a memory-mapped base: fed chunk by chunk, never copied whole
            for lo, chunk in base_chunks(x, metric="l2"):
                index.add_items(chunk, np.arange(lo, lo + chunk.shape[0], dtype=np.int64),
                                num_threads=self.build_threads)
        else:
            index.add_items(x, np.arange(x.shape[0], dtype=np.int64),
                            num_threads=self.build_threads)
        index.set_num_threads(self.threads)
        self._index = index
        return {"space": _SPACES[self.metric]}

    def _save_files(self, folder: Path) -> list[str]:
        path = folder / "index.hnsw"
        self._index.save_index(str(path))
        # hnswlib writes through an unchecked std::ofstream: a short write (disk full) is
        # silent, so the file's size is checked against the size hnswlib computes
        want, got = int(self._index.index_file_size()), path.stat().st_size
        if got != want:
            raise OSError(f"hnswlib wrote {got} of {want} bytes to {path} (disk full?)")
        return ["index.hnsw"]

    def _load_files(self, folder: Path, n: int) -> None:
        import hnswlib

        index = hnswlib.Index(space=_SPACES[self.metric], dim=self.dim)
        index.load_index(str(folder / "index.hnsw"), max_elements=n, allow_replace_deleted=True)
        if index.get_current_count() != n or index.dim != self.dim:
            raise DataError(f"{self._where()}: snapshot holds {index.get_current_count()} "
                            f"vectors of dim {index.dim}, expected {n} of dim {self.dim}")
        index.set_num_threads(self.threads)
        self._index = index

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sp = self.search_params
        assert isinstance(sp, HnswSearch)
        self._index.set_ef(sp.ef_search)
        nq = x.shape[0]
        if k <= self._n:  # hot path: hnswlib answers k ids per query or raises
            try:
                labels, dist = self._index.knn_query(x, k=k, num_threads=self.threads)
            except RuntimeError:
                pass
            else:
                if self.metric == "ip":
                    dist = dist - np.float32(1.0)
                return dist, labels.astype(np.int64)
        ids = np.full((nq, k), -1, dtype=np.int64)
        d = np.full((nq, k), np.inf, dtype=np.float32)
        kk = min(k, self._n)  # hnswlib raises when asked for more ids than it holds
        try:
            labels, dist = self._index.knn_query(x, k=kk, num_threads=self.threads)
            ids[:, :kk], d[:, :kk] = labels, dist
        except RuntimeError:
            # some query reached fewer than kk nodes (possible when kk is close to n): answer
            # query by query, with as many results as each one finds, padded with -1
            log.info("%s: fewer than k=%d results for some queries; padding", self.name, kk)
            for row in range(nq):
                got = self._query_at_most(x[row:row + 1], kk)
                if got is not None:
                    m = got[0].shape[1]
                    ids[row, :m], d[row, :m] = got[0][0], got[1][0]
        if self.metric == "ip":
            d = d - np.float32(1.0)  # hnswlib 'ip' distance is 1 - <x, q>; inf stays inf
        return d, ids

    def _hot(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
        if k > self._n:
            return super()._hot(k)
        sp = self.search_params
        assert isinstance(sp, HnswSearch)
        lib, threads, ip = self._index, self.threads, self.metric == "ip"
        lib.set_ef(sp.ef_search)

        def call(x: np.ndarray) -> Any:
            return lib.knn_query(x, k=k, num_threads=threads)

        def rows(raw: Any) -> tuple[np.ndarray, np.ndarray]:
            labels, dist = raw
            return (dist - np.float32(1.0) if ip else dist), labels.astype(np.int64)

        return call, rows

    def _filtered(self, x: np.ndarray, k: int, flt: RowFilter) -> tuple[np.ndarray, np.ndarray]:
        """hnswlib's filter function (called on each visited label; one thread, as hnswlib
        advises for Python filters); fewer than k found: the largest answer it gives."""
        sp = self.search_params
        assert isinstance(sp, HnswSearch)
        self._index.set_ef(sp.ef_search)
        keep = flt.mask.__getitem__
        kk = min(k, flt.count)
        try:
            labels, dist = self._index.knn_query(x, k=kk, num_threads=1, filter=keep)
            d, i = dist, labels.astype(np.int64)
        except RuntimeError:  # some query found fewer than kk matches: row by row
            i = np.full((x.shape[0], kk), -1, dtype=np.int64)
            d = np.full((x.shape[0], kk), np.inf, dtype=np.float32)
            for row in range(x.shape[0]):
                got = self._query_at_most(x[row:row + 1], kk, keep)
                if got is not None:
                    m = got[0].shape[1]
                    i[row, :m], d[row, :m] = got[0][0], got[1][0]
        if self.metric == "ip":
            d = d - np.float32(1.0)
        return pad(d, i, k)

    def _query_at_most(self, q: np.ndarray, k: int, keep: Any = None
                       ) -> tuple[np.ndarray, np.ndarray] | None:
        """Largest m <= k for which hnswlib answers (bisection), with its answer."""
        lo, hi, best = 1, k, None
        while lo <= hi:
            mid = (lo + hi) // 2
            try:
                best = self._index.knn_query(q, k=mid, num_threads=1, filter=keep)
                lo = mid + 1
            except RuntimeError:
                hi = mid - 1
        return best

    def memory_claim(self) -> MemoryClaim:
        """float32 vector + layer-0 links (2*M uint32 + a count) + label (8 bytes)."""
        p = self.build_params
        assert isinstance(p, HnswBuild)
        return MemoryClaim(4.0 * self.dim + 8.0 * p.M + 12.0, "float32")

    def memory_bytes(self) -> int:
        """Size in bytes of the serialized index as hnswlib computes it
        (``index_file_size()``, equal to the file ``save_index`` writes): graph links plus
        vectors, measured from the built structure."""
        if self._index is None:
            return 0
        return int(self._index.index_file_size())

    def _release(self) -> None:
        self._index = None

    # --- writes (SlotWrites hooks) -------------------------------------------------------------
    def _built_count(self) -> int:
        return self._n

    def _check_writable(self) -> None:
        self._check_open()
        if not self._built:
            raise ConfigError(f"{self._where()}: insert/delete called before build()")

    def _after_writes(self, live: int) -> None:
        self._n = live
        self._checked_k = -1

    def _insert_rows(self, x: np.ndarray, slots: np.ndarray) -> None:
        st = self._state()
        fresh = max(0, x.shape[0] - st.dead)  # replace_deleted fills dead slots first
        need = int(self._index.element_count) + fresh
        if need > int(self._index.get_max_elements()):
            self._index.resize_index(max(need, int(1.25 * self._index.get_max_elements())))
        self._index.add_items(x, slots, num_threads=self.build_threads, replace_deleted=True)
        st.dead -= x.shape[0] - fresh

    def reserve(self, n: int) -> None:
        """Room for ``n`` nodes (live + deleted not yet replaced) without a resize later
        (:class:`~retrieval.indexes.base.SupportsReserve`)."""
        self._check_writable()
        if int(n) > int(self._index.get_max_elements()):
            self._index.resize_index(int(n))

    def _delete_rows(self, slots: np.ndarray) -> None:
        for s in slots.tolist():
            self._index.mark_deleted(s)
        self._state().dead += int(slots.shape[0])

    def _maintain(self) -> tuple[str, dict[str, Any]]:
        """hnswlib has no vacuum: deleted nodes are reused by later inserts."""
        return "none", {"dead": 0 if self._wstate is None else self._wstate.dead}

    def dead_fraction(self) -> float | None:
        """Marked-deleted nodes not yet replaced / nodes held (0.0 before any delete)."""
        self._check_writable()
        held = int(self._index.element_count)
        dead = 0 if self._wstate is None else self._wstate.dead
        return dead / held if held else 0.0
