"""LanceDB, embedded: one table (columns ``id`` int64, the caller's ids, and ``vector``) in a
folder rwb creates, with one vector index built by ``create_index("vector", config=...)``:

- ``lancedb-ivfpq``: ``IvfPq`` (IVF lists of PQ codes); search knobs ``nprobes`` and
  ``refine_factor``;
- ``lancedb-hnsw``: ``IvfHnswSq`` (IVF_HNSW_SQ: an HNSW graph over 8-bit scalar-quantized
  vectors in each IVF partition; one partition by default); search knobs ``ef``, ``nprobes``
  and ``refine_factor``.

The traps this module defeats: LanceDB answers by brute force, with only a log line, when the
query's distance type differs from the index's (rwb sets it on every query) and leaves a table
unindexed when it holds too few vectors (rwb refuses fewer than 256 per partition, checks that
LanceDB reports every row indexed and that the query plan reads the index); and
:meth:`LanceIndex.verify_not_brute_force` checks that recall moves with the knob.

Distances: LanceDB's ``l2`` is the squared Euclidean distance and ``cosine`` is ``1 - cos``
(rwb's own); its ``dot`` is ``1 - <x, q>``, converted to rwb's ``-<x, q>``. Builds are not
reproducible: LanceDB's k-means and HNSW levels draw from unseeded generators. LanceDB runs
its own thread pools (``LANCE_CPU_THREADS``), not rwb's ``threads``.

Filtered search (``SupportsFilter``): attributes as columns, filters as ``where`` clauses
with prefilter (:mod:`retrieval.engines.lancedb.filter`). Native segments
(``SupportsNativeSegments``): the table written as N fragments, one index over all of them.

Memory: the bytes of the table's data files and index files on disk (LanceDB memory-maps
them); ``BuildInfo.extra`` splits them (``data_bytes``, ``index_bytes``).

Snapshots (the build cache, :class:`~retrieval.indexes.base.SupportsSnapshot`) are the table's
own Lance folder, copied; a loaded one is a copy in a folder of its own, checked to hold ``n``
rows of this dimension, every row indexed by an index of this type and distance. Since builds
are not reproducible, this is what lets ``rwb verify`` re-measure the sweep's own index.

Writes (:class:`~retrieval.indexes.base.SupportsWrites`): the ``id`` column holds the caller's
ids, so nothing is mapped; rwb keeps the set of live ids to refuse a live id inserted again or
an unknown one deleted. An insert is ``table.add`` (the new rows are unindexed: LanceDB scans
them exactly and merges them with the index's answer), a delete ``table.delete("id IN
(...)")`` (deletion files: the rows are filtered out at once); ``maintain`` is
``table.optimize()`` (compacts the data files, materialises the deletions, adds the unindexed
rows to the index, prunes old versions) and reports the indexed / unindexed rows before and
after. No snapshot after writes (the build cache holds built indexes only).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retrieval.data import Metric, as_matrix
from retrieval.engines.lancedb.filter import LanceFilter
from retrieval.engines.lancedb.params import (
    DISTANCE,
    EF_MAX,
    MAX_ITERATIONS,
    REFINE_FACTOR_MAX,
    SAMPLE_RATE,
    HnswSqBuild,
    HnswSqSearch,
    IvfPqBuild,
    IvfPqSearch,
    check_dim,
    check_rows,
    check_search,
    portable_hnsw,
    portable_ivfpq,
)
from retrieval.errors import BackendError, ConfigError, DataError
from retrieval.indexes.base import BuildInfo, MaintainInfo, MemoryClaim
from retrieval.indexes.brute_check import BruteForceCheck
from retrieval.indexes.inprocess import SnapshotIndex, check_ids, check_k, unknown_knob
from retrieval.indexes.knob_check import knob_check
from retrieval.indexes.portable import Portable
from retrieval.indexes.registry import package_version, register
from retrieval.params import Params

log = logging.getLogger(__name__)

TABLE = "vectors"
#: rows per Arrow batch written to the table
WRITE_BATCH = 65536


def index_config(build: Params, metric: str) -> Any:
    """The ``lancedb.index`` config object of a build (what the export writes, by name)."""
    from lancedb.index import IvfHnswSq, IvfPq

    dt = DISTANCE[metric]
    if isinstance(build, IvfPqBuild):
        return IvfPq(distance_type=dt, num_partitions=build.num_partitions,  # type: ignore[arg-type]
                     num_sub_vectors=build.num_sub_vectors, num_bits=build.num_bits,
                     max_iterations=MAX_ITERATIONS, sample_rate=SAMPLE_RATE)
    assert isinstance(build, HnswSqBuild)
    return IvfHnswSq(distance_type=dt, num_partitions=build.num_partitions,  # type: ignore[arg-type]
                     m=build.m, ef_construction=build.ef_construction,
                     max_iterations=MAX_ITERATIONS, sample_rate=SAMPLE_RATE)


def _arrow_table(x: np.ndarray, ids: np.ndarray, extra: Mapping[str, Any] | None = None) -> Any:
    import pyarrow as pa

    vec = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1), type=pa.float32()),
                                            x.shape[1])
    return pa.table({"id": pa.array(ids, type=pa.int64()), "vector": vec, **(extra or {})})


def _folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


class LanceIndex(LanceFilter, SnapshotIndex):
    """Shared plumbing of the LanceDB backends (see the module docstring)."""

    export_engine: ClassVar[str] = "lancedb"
    snapshot_format = "lance table folder"
    requires = ("lancedb",)
    deterministic = False
    index_type: ClassVar[str] = ""

    _db: Any = None
    _table: Any = None
    _dir: Path | None = None
    _owned = False

    def __init__(self, dim: int, metric: Metric, build: Params | None = None, **kw: Any) -> None:
        super().__init__(dim, metric, build, **kw)
        self._column_ids: np.ndarray | None = None
        self._distance = DISTANCE[self.metric]
        #: live ids (None until the first write: then the build's ids)
        self._live: set[int] | None = None

    @classmethod
    def library_version(cls) -> str:
        import lancedb  # noqa: F401

        return f"lancedb {package_version('lancedb')}"

    @classmethod
    def check_build_params(cls, build: Params, dim: int) -> None:
        check_dim(cls.name, build, dim)

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        check_search(cls.name, build, search, k)

    # --- build -----------------------------------------------------------------------------
    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> BuildInfo:
        """Build from ``vectors`` (n, dim); ``ids`` (int64 >= 0, default row numbers) are
        stored in the table's ``id`` column and returned by searches as they are."""
        self._check_open()
        x = as_matrix(vectors, f"{self._where()} build vectors", dim=self.dim)
        n = x.shape[0]
        self._column_ids = (np.arange(n, dtype=np.int64) if ids is None
                            else check_ids(ids, n, f"{self._where()} build"))
        self._live = None
        return super().build(x)

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        import lancedb

        b = self.build_params
        assert isinstance(b, IvfPqBuild | HnswSqBuild) and self._column_ids is not None
        n = x.shape[0]
        check_rows(self.name, b.num_partitions, n)
        self._make_dir()
        try:
            self._db = lancedb.connect(str(self._dir))
            parts = self._write_parts(n)
            table = self._db.create_table(TABLE, _arrow_table(
                x[parts[0]], self._column_ids[parts[0]], self._attr_columns(parts[0])),
                mode="create")
            for part in parts[1:]:
                table.add(_arrow_table(x[part], self._column_ids[part],
                                       self._attr_columns(part)))
            table.create_index("vector", config=index_config(b, self.metric))
            scalar = self._attr_indexes(table)
            stats = table.index_stats("vector_idx")
            plan = self._query(table, x[0], 1).explain_plan()
        except Exception as exc:
            self._release()
            raise BackendError(f"{self._where()}: LanceDB refused the build "
                               f"({type(exc).__name__}: {str(exc)[:300]})") from None
        self._table = table
        if stats is None or stats.num_indexed_rows != n or stats.num_unindexed_rows:
            self._release()
            raise BackendError(
                f"{self._where()}: LanceDB indexed {getattr(stats, 'num_indexed_rows', 0)} of "
                f"{n} vectors; the rest would be brute-forced")
        if "ANNSubIndex" not in plan:
            self._release()
            raise BackendError(f"{self._where()}: LanceDB's query plan does not read the "
                               f"vector index (a brute-force scan): {plan.strip()[:300]}")
        return {"index_type": self.index_type, "distance_type": self._distance,
                "indexed_rows": int(stats.num_indexed_rows), "scalar_indexes": scalar,
                "data_bytes": _folder_bytes(self._table_dir() / "data"),
                "index_bytes": _folder_bytes(self._table_dir() / "_indices"),
                "library": self.library_version()}

    # --- native segments (SupportsNativeSegments): fragments ----------------------------------
    segments_note = ("LanceDB fragments (one append each); the vector index is one over all "
                     "fragments, so a query searches one index, not one per fragment")
    _segments = 0

    def set_segments(self, n: int) -> None:
        """Write the next build's table as ``n`` fragments (one ``add`` each; 0 or 1 keeps
        the usual batches of :data:`WRITE_BATCH` rows)."""
        if int(n) < 1:
            raise ConfigError(f"{self._where()}: segments (fragments) must be >= 1; "
                              f"received {n}")
        self._segments = int(n)

    def _write_parts(self, n: int) -> list[slice]:
        if self._segments > 1:
            edges = np.linspace(0, n, self._segments + 1).round().astype(int).tolist()
            return [slice(edges[j], edges[j + 1]) for j in range(self._segments)]
        return [slice(s, s + WRITE_BATCH) for s in range(0, max(n, 1), WRITE_BATCH)]

    def segment_count(self) -> int | None:
        """The table's fragments as LanceDB reports them (``stats().fragment_stats``)."""
        stats = self._lance("stats", self._table.stats)
        frags = stats.get("fragment_stats", {}).get("num_fragments") if isinstance(
            stats, Mapping) else None
        return None if frags is None else int(frags)

    def merge_segments(self) -> MaintainInfo:
        """``maintain()`` (``table.optimize()``: compaction of the fragments, the index brought
        up to date), with the fragment count after it."""
        info = self.maintain()
        return MaintainInfo(info.action, info.seconds,
                            {**info.extra, "segments_after": self.segment_count()})

    def _make_dir(self) -> None:
        """A fresh folder of rwb's for the table: under ``workdir``, else under a temp one."""
        base = self.workdir or Path(tempfile.mkdtemp(prefix="rwb-lancedb-"))
        base.mkdir(parents=True, exist_ok=True)  # a caller's folder that is not there yet
        self._owned = self.workdir is None
        self._dir = Path(tempfile.mkdtemp(prefix="lancedb-", dir=base))

    def _table_dir(self) -> Path:
        assert self._dir is not None
        return self._dir / f"{TABLE}.lance"

    # --- snapshot ----------------------------------------------------------------------------
    def _save_files(self, folder: Path) -> list[str]:
        """Copy the table's Lance folder into ``folder``; the names of the files written."""
        if self._live is not None:
            raise ConfigError(f"{self._where()}: no snapshot after inserts or deletes (the "
                              f"build cache holds built indexes only)")
        dest = folder / f"{TABLE}.lance"
        shutil.copytree(self._table_dir(), dest)
        return sorted(str(f.relative_to(folder)) for f in dest.rglob("*") if f.is_file())

    def _load_files(self, folder: Path, n: int) -> None:
        import lancedb

        src = folder / f"{TABLE}.lance"
        if self._attrs is not None:  # the cached table's attribute columns are not checked
            raise DataError(f"{self._where()}: a build with filter attributes is built, not "
                            f"loaded from a snapshot")
        if not src.is_dir():
            raise DataError(f"{self._where()}: snapshot in {folder} has no {TABLE}.lance")
        self._make_dir()
        try:
            shutil.copytree(src, self._table_dir())
            self._db = lancedb.connect(str(self._dir))
            table = self._db.open_table(TABLE)
            rows, stats = table.count_rows(), table.index_stats("vector_idx")
            size = table.schema.field("vector").type.list_size
        except Exception as exc:  # the library refused the folder
            self._release()
            raise DataError(f"{self._where()}: snapshot in {folder} not readable: "
                            f"{type(exc).__name__}: {str(exc)[:300]}") from None
        got = (rows, size, getattr(stats, "num_indexed_rows", None),
               getattr(stats, "index_type", None), getattr(stats, "distance_type", None))
        want = (n, self.dim, n, self.index_type, self._distance)
        if got != want:
            self._release()
            raise DataError(f"{self._where()}: snapshot in {folder} holds (rows, dim, indexed "
                            f"rows, index type, distance) {got}, expected {want}")
        self._table, self._live = table, None

    # --- writes (SupportsWrites) -------------------------------------------------------------
    def cannot_write(self) -> str | None:
        return "its rows carry filter attributes" if self._attrs is not None else None

    def _writable(self, what: str) -> set[int]:
        self._check_open()
        if self._table is None:
            raise ConfigError(f"{self._where()}: {what} called before build()")
        if self._live is None:
            assert self._column_ids is not None
            self._live = set(self._column_ids.tolist())
        return self._live

    def _lance(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise BackendError(f"{self._where()}: LanceDB {what} failed "
                               f"({type(exc).__name__}: {str(exc)[:300]})") from None

    def insert(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add ``vectors`` (m, dim) under the caller's ``ids`` (none of them live)."""
        live = self._writable("insert")
        if self._attrs is not None:
            raise ConfigError(f"{self._where()}: no insert into a table with filter "
                              f"attributes (the new rows would have none)")
        x = as_matrix(vectors, f"{self._where()} insert vectors", dim=self.dim)
        new = check_ids(ids, x.shape[0], f"{self._where()} insert")
        dup = [v for v in new.tolist() if v in live]
        if dup:
            raise DataError(f"{self._where()} insert: id {dup[0]} is already in the index "
                            f"({len(dup)} of the {len(new)} ids are); delete it first")
        for s in range(0, x.shape[0], WRITE_BATCH):
            self._lance("add", self._table.add,
                        _arrow_table(x[s:s + WRITE_BATCH], new[s:s + WRITE_BATCH]))
        live.update(new.tolist())
        self._n = len(live)

    def delete(self, ids: np.ndarray) -> None:
        """Remove the live ``ids``; a deleted id is never returned again."""
        live = self._writable("delete")
        arr = np.asarray(ids)
        if arr.ndim != 1:
            raise DataError(f"{self._where()} delete: ids must be a 1-d array; received "
                            f"shape {arr.shape}")
        gone = check_ids(arr, arr.shape[0], f"{self._where()} delete")
        missing = [v for v in gone.tolist() if v not in live]
        if missing:
            raise DataError(f"{self._where()} delete: id {missing[0]} is not in the index "
                            f"({len(missing)} of the {len(gone)} ids are not)")
        for s in range(0, gone.shape[0], WRITE_BATCH):
            part = ", ".join(str(int(v)) for v in gone[s:s + WRITE_BATCH].tolist())
            self._lance("delete", self._table.delete, f"id IN ({part})")
        live.difference_update(gone.tolist())
        self._n = len(live)

    def _index_rows(self) -> tuple[int, int]:
        stats = self._lance("index_stats", self._table.index_stats, "vector_idx")
        return (int(getattr(stats, "num_indexed_rows", 0)),
                int(getattr(stats, "num_unindexed_rows", 0)))

    def maintain(self) -> MaintainInfo:
        """``table.optimize()`` (compaction, deletions, index update, version pruning), timed."""
        live = self._writable("maintain")
        import time

        before = self._index_rows()
        t0 = time.perf_counter_ns()
        self._lance("optimize", self._table.optimize)
        seconds = (time.perf_counter_ns() - t0) / 1e9
        after = self._index_rows()
        return MaintainInfo("optimize", seconds, {
            "indexed_rows_before": before[0], "unindexed_rows_before": before[1],
            "indexed_rows": after[0], "unindexed_rows": after[1], "live": len(live)})

    def live_count(self) -> int:
        """Live rows: built + inserted - deleted."""
        self._writable("live_count")
        assert self._live is not None
        return len(self._live)

    # --- search ----------------------------------------------------------------------------
    def _query(self, table: Any, q: np.ndarray, k: int) -> Any:
        """The LanceDB query of ``q`` (one row or a matrix) with the current search params and
        the index's distance type (another one makes LanceDB scan every row)."""
        sp = self.search_params
        assert isinstance(sp, IvfPqSearch | HnswSqSearch)
        query = (table.search(q, vector_column_name="vector").distance_type(self._distance)
                 .limit(k).nprobes(sp.nprobes).select(["id", "_distance"]))
        if isinstance(sp, HnswSqSearch):
            query = query.ef(sp.ef)
        if sp.refine_factor is not None:
            query = query.refine_factor(sp.refine_factor)
        return query

    def _to_rwb(self, d: np.ndarray) -> np.ndarray:
        """LanceDB distances as rwb's: ``dot`` (``1 - ip``) to ``-ip``; l2 and cosine as is."""
        return d - 1.0 if self.metric == "ip" else d

    def _rows(self, raw: Any, nq: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """An Arrow result (``query_index`` when nq > 1, ``id``, ``_distance``) as (nq, k)
        distances (float32, ascending, +inf padded) and ids (-1 padded)."""
        ids = np.full((nq, k), -1, dtype=np.int64)
        d = np.full((nq, k), np.inf, dtype=np.float32)
        if raw.num_rows == 0:
            return d, ids
        got_ids = raw.column("id").to_numpy()
        got_d = self._to_rwb(raw.column("_distance").to_numpy().astype(np.float64))
        qi = (raw.column("query_index").to_numpy() if "query_index" in raw.column_names
              else np.zeros(len(got_ids), dtype=np.int64))
        order = np.lexsort((got_d, qi))
        qi, got_ids, got_d = qi[order], got_ids[order], got_d[order]
        starts = np.searchsorted(qi, np.arange(nq))
        pos = np.arange(len(qi)) - starts[qi]
        keep = pos < k
        ids[qi[keep], pos[keep]] = got_ids[keep]
        d[qi[keep], pos[keep]] = got_d[keep]
        return d, ids

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = x[0] if x.shape[0] == 1 else x
        return self._rows(self._query(self._table, q, k).to_arrow(), x.shape[0], k)

    def _hot(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
        table, query = self._table, self._query

        def call(x: np.ndarray) -> Any:
            return query(table, x[0], k).to_arrow()

        return call, (lambda raw: self._rows(raw, 1, k))

    # --- checks, memory, close ---------------------------------------------------------------
    def verify_not_brute_force(self, queries: np.ndarray, k: int, exact_ids: np.ndarray, *,
                               raise_on_failure: bool = True) -> BruteForceCheck:
        """Recall at both ends of the first monotone knob (:mod:`retrieval.indexes.knob_check`)."""
        knob = type(self).monotone_knobs_for(self.build_params)[0]
        return knob_check(self, knob, queries, k, exact_ids, raise_on_failure=raise_on_failure,
                          why=f"distance_type {self._distance} on the query, every row indexed")

    def memory_bytes(self) -> int:
        """Bytes of the table's data and index files (see the module docstring)."""
        if self._dir is None:
            return 0
        return _folder_bytes(self._table_dir() / "data") + _folder_bytes(
            self._table_dir() / "_indices")

    def memory_claim(self) -> MemoryClaim:
        """What the index holds per row (bytes), from its params alone: IVF_PQ
        ``num_sub_vectors * num_bits / 8`` code bytes; IVF_HNSW_SQ one byte a dimension + the
        layer-0 links (2*m int32); each + an 8-byte row id. The float vectors stay in the
        table's data files on disk: ``refine_factor`` re-ranks by them (refine store: disk)."""
        b = self.build_params
        if isinstance(b, IvfPqBuild):
            return MemoryClaim(b.num_sub_vectors * b.num_bits / 8 + 8.0,
                               f"IVF_PQ (PQ{b.num_sub_vectors}x{b.num_bits})", "disk")
        assert isinstance(b, HnswSqBuild)
        return MemoryClaim(float(self.dim) + 8.0 * b.m + 8.0, "IVF_HNSW_SQ (SQ8)", "disk")

    def memory_facts(self) -> dict[str, Any]:
        """LanceDB's own files: ``resident_bytes`` = the index files (``_indices``: what a
        query reads into LanceDB's index cache); ``disk_bytes`` = data + index files (the data
        files stay memory-mapped, read by ``refine_factor``). An RSS delta around a load says
        nothing here: LanceDB maps the files and reads them lazily."""
        if self._dir is None:
            raise ConfigError(f"backend '{self.name}': memory_facts() called before build()")
        index = _folder_bytes(self._table_dir() / "_indices")
        data = _folder_bytes(self._table_dir() / "data")
        return {"resident_bytes": index, "disk_bytes": index + data, "data_bytes": data,
                "source": "LanceDB index files of the table (_indices, read into its index "
                          "cache by queries); disk: data + index files"}

    def save_cold(self, folder: Path) -> None:
        """Copy the table into ``folder`` (its snapshot)."""
        self.save_snapshot(folder)

    def open_cold(self, folder: Path, n: int) -> list[Path]:
        """Become the index saved in ``folder`` (a fresh copy in a folder of rwb's, opened by a
        fresh connection: nothing in LanceDB's in-process caches yet); returns the copy's files
        (flushed to disk, so their pages can be dropped)."""
        self.load_snapshot(folder, n)
        files = sorted(f for f in self._table_dir().rglob("*") if f.is_file())
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return files

    def _release(self) -> None:
        self._table = self._db = None
        if self._dir is not None:
            shutil.rmtree(self._dir.parent if self._owned else self._dir, ignore_errors=True)
            self._dir = None


@register
class LanceIvfPqIndex(LanceIndex):
    """LanceDB IVF_PQ (see the module docstring)."""

    name = "lancedb-ivfpq"
    family = "ivf"
    index_type = "IVF_PQ"
    BuildParams = IvfPqBuild
    SearchParams = IvfPqSearch
    monotone_knobs = ("nprobes", "refine_factor")

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable:
        return portable_ivfpq(build, search)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        assert isinstance(build, IvfPqBuild)
        return {"nprobes": build.num_partitions, "refine_factor": REFINE_FACTOR_MAX}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """nprobes in [1, num_partitions]; refine_factor in [1, 64]."""
        assert isinstance(build, IvfPqBuild)
        check_k(k, f"backend '{cls.name}' knob_range")
        if knob == "nprobes":
            return 1, build.num_partitions
        if knob == "refine_factor":
            return 1, REFINE_FACTOR_MAX
        raise unknown_knob(cls, knob)


@register
class LanceHnswSqIndex(LanceIndex):
    """LanceDB IVF_HNSW_SQ (see the module docstring)."""

    name = "lancedb-hnsw"
    family = "hnsw"
    index_type = "IVF_HNSW_SQ"
    BuildParams = HnswSqBuild
    SearchParams = HnswSqSearch
    monotone_knobs = ("ef", "nprobes")

    @classmethod
    def monotone_knobs_for(cls, build: Params | None) -> tuple[str, ...]:
        """``ef``, and ``nprobes`` when there is more than one partition."""
        if isinstance(build, HnswSqBuild) and build.num_partitions == 1:
            return ("ef",)
        return cls.monotone_knobs

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable:
        return portable_hnsw(build, search)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        """The largest ef over every partition, without refine (a refine_factor raises the
        smallest allowed ef to k * refine_factor)."""
        assert isinstance(build, HnswSqBuild)
        return {"ef": EF_MAX, "nprobes": build.num_partitions, "refine_factor": None}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """ef in [k, 4096]; nprobes in [1, num_partitions]."""
        assert isinstance(build, HnswSqBuild)
        k = check_k(k, f"backend '{cls.name}' knob_range")
        if knob == "ef":
            return min(k, EF_MAX), EF_MAX
        if knob == "nprobes":
            return 1, build.num_partitions
        raise unknown_knob(cls, knob)


__all__ = ["LanceHnswSqIndex", "LanceIndex", "LanceIvfPqIndex", "index_config"]
