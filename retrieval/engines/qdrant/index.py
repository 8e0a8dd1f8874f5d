"""Qdrant's own engine, embedded: one ``qdrant_edge.EdgeShard`` (the Rust storage and HNSW code
of the Qdrant server, run in this process by the ``qdrant-edge-py`` wheel).

The trap this module defeats: with Qdrant's default optimizer settings a small collection is
never indexed (``indexing_threshold`` 10000 KB) and segments under ``full_scan_threshold`` are
answered by full scan, so every ``hnsw_ef`` gives recall 1.0. rwb sets both thresholds (build
params, default 1 KB), runs the optimizer to completion (``EdgeShard.optimize``, blocking),
checks that Qdrant reports every vector indexed (``ShardInfo.indexed_vectors_count``), and
:meth:`QdrantIndex.verify_not_brute_force` checks that recall moves with ``hnsw_ef``.

Distances: Qdrant ``Euclid`` scores the (unsquared) Euclidean distance, converted to rwb's
squared l2; ``Dot`` and ``Cosine`` score similarities, converted to ``-ip`` and ``1 - cos``
(Qdrant normalises vectors itself for Cosine). Builds are not reproducible: Qdrant's HNSW
draws node levels from an unseeded generator (``deterministic = False``).

Memory: the bytes of the files Qdrant wrote for its indexed segments (vector storage, HNSW
graph and links, quantized codes), Qdrant's own structures; pre-allocated pages of its empty
appendable segments, its WAL and payload storage are not counted.

Filtered search (``SupportsFilter``, the ``engine`` strategy, through Qdrant's own filters; see
:mod:`._qdrant_filter`): ``attach_attributes(attrs)`` before ``build`` makes the build create a
payload index per attribute (integer: lookup + range; label: keyword) and then write each
attribute as point payload (``a_<name>``: an integer, or the row's list of labels), so the
optimizer builds the filterable-HNSW extra links with the graph (their bytes are in the HNSW
files, hence in memory; payload indexes are not); ``BuildInfo.extra["payload_indexes"]`` lists
what Qdrant reports indexed. ``filtered_search(queries, k, flt)`` sends ``flt.where`` as
``QueryRequest(filter=Filter(must=[FieldCondition(...)]))`` (``MatchValue`` for ``eq``,
``MatchAny`` for ``in``, ``RangeFloat(gte, lte)`` for an inclusive integer range). Qdrant's
planner answers a filter it estimates to match fewer points than ``full_scan_threshold`` by
scanning the payload index's matches, otherwise by a filtered HNSW walk. The search knob
``acorn`` (``true``/``false``, default false; ``acorn_max_selectivity`` optional) turns on
Qdrant's ACORN walk for filtered searches only (``SearchParams(acorn=AcornSearchParams(
enable=True))``); a qdrant-edge-py without ACORN refuses ``acorn: true`` in one line.
Results have fewer than k ids (-1 padded) when Qdrant finds fewer.

Writes (:class:`~retrieval.indexes.base.SupportsWrites`, through
:class:`~retrieval.indexes.writes.SlotWrites`: point ids are slots, the caller's int64 ids are
mapped in rwb): an insert is a point upsert (the new points land in Qdrant's appendable segment,
searched by full scan until the optimizer indexes them), a delete ``delete_points`` (Qdrant
marks the points deleted in their segments at once); ``maintain`` runs Qdrant's optimizers to
completion (``EdgeShard.optimize``: vacuum of segments past ``deleted_threshold``, indexing of
the appended points, merges) and reports segments and indexed vectors before and after. A build
with attributes attached (filtered search) takes no writes (inserts would carry no payload).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import Metric
from retrieval.engines.qdrant.filter import QdrantFilter, create_payload_indexes, payloads
from retrieval.engines.qdrant.params import (
    HNSW_EF_MAX,
    OVERSAMPLING_MAX,
    QdrantBuild,
    QdrantSearch,
    check_build,
    check_dim,
    check_search,
    portable_of,
)
from retrieval.engines.qdrant.segments import QdrantSegments
from retrieval.errors import BackendError, ConfigError, DataError, unknown_name_error
from retrieval.indexes.base import MemoryClaim
from retrieval.indexes.brute_check import BruteForceCheck
from retrieval.indexes.inprocess import InProcessIndex, check_k
from retrieval.indexes.knob_check import knob_check
from retrieval.indexes.portable import Portable
from retrieval.indexes.registry import package_version, register
from retrieval.indexes.writes import SlotWrites
from retrieval.params import Params

log = logging.getLogger(__name__)

DISTANCE = {"l2": "Euclid", "ip": "Dot", "cosine": "Cosine"}
#: points per upsert call
UPSERT_BATCH = 2048


def edge_config(dim: int, metric: str, b: QdrantBuild, threads: int, segments: int = 1) -> Any:
    """The ``qdrant_edge.EdgeConfig`` of a build (also what the export writes, in JSON names);
    ``segments``: the shard's ``default_segment_number`` (native segments, :mod:`.segments`)."""
    import qdrant_edge as q

    quant: Any = None
    if b.quantization == "scalar":
        quant = q.ScalarQuantizationConfig(type=q.ScalarType.Int8, quantile=b.quantile,
                                           always_ram=b.always_ram)
    elif b.quantization == "binary":
        quant = q.BinaryQuantizationConfig(always_ram=b.always_ram)
    elif b.quantization == "product":
        ratio = getattr(q.CompressionRatio, b.pq_compression.upper())
        quant = q.ProductQuantizationConfig(compression=ratio, always_ram=b.always_ram)
    return q.EdgeConfig(
        vectors=q.EdgeVectorParams(size=dim, distance=getattr(q.Distance, DISTANCE[metric]),
                                   on_disk=b.on_disk),
        hnsw_config=q.HnswIndexConfig(m=b.m, ef_construct=b.ef_construct,
                                      full_scan_threshold=b.full_scan_threshold,
                                      max_indexing_threads=threads, on_disk=b.on_disk),
        quantization_config=quant,
        optimizers=q.EdgeOptimizersConfig(indexing_threshold=b.indexing_threshold,
                                          default_segment_number=int(segments)),
        max_search_threads=threads,
    )


def search_params(sp: QdrantSearch, quantized: bool) -> Any:
    import qdrant_edge as q

    quant = (q.QuantizationSearchParams(rescore=sp.rescore, oversampling=sp.oversampling)
             if quantized else None)
    return q.SearchParams(hnsw_ef=sp.hnsw_ef, exact=False, quantization=quant)


def filtered_search_params(sp: QdrantSearch, quantized: bool) -> Any:
    """:func:`search_params` plus ACORN (``acorn``, ``acorn_max_selectivity``) when it is on."""
    import qdrant_edge as q

    if not sp.acorn:
        return search_params(sp, quantized)
    quant = (q.QuantizationSearchParams(rescore=sp.rescore, oversampling=sp.oversampling)
             if quantized else None)
    acorn = q.AcornSearchParams(enable=True, max_selectivity=sp.acorn_max_selectivity)
    return q.SearchParams(hnsw_ef=sp.hnsw_ef, exact=False, quantization=quant, acorn=acorn)


@register
class QdrantIndex(SlotWrites, QdrantSegments, QdrantFilter, InProcessIndex):
    """Qdrant's engine in process (see the module docstring)."""

    name = "qdrant"
    export_engine = "qdrant"
    family = "hnsw"
    BuildParams = QdrantBuild
    SearchParams = QdrantSearch
    monotone_knobs = ("hnsw_ef", "oversampling")
    requires = ("qdrant_edge",)
    deterministic = False

    _shard: Any = None
    _dir: Path | None = None
    _params: Any = None
    _fparams: Any = None

    def __init__(self, dim: int, metric: Metric, build: Params | None = None, **kw: Any) -> None:
        super().__init__(dim, metric, build, **kw)
        check_dim(self.dim)
        check_build(self.build_params)

    @classmethod
    def library_version(cls) -> str:
        import qdrant_edge  # noqa: F401

        return f"qdrant-edge-py {package_version('qdrant-edge-py')}"

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable:
        return portable_of(build, search)

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        check_search(build, search, check_k(k, "backend 'qdrant' search params"))

    @classmethod
    def monotone_knobs_for(cls, build: Params | None) -> tuple[str, ...]:
        """``hnsw_ef``; with quantization also ``oversampling`` (with ``rescore``: more
        candidates re-ranked by the original vectors)."""
        quantized = isinstance(build, QdrantBuild) and build.quantization != "none"
        return cls.monotone_knobs if quantized else ("hnsw_ef",)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        """The largest hnsw_ef (oversampling left as it is: at its top every hnsw_ef answers
        alike; without quantization it is reset to 1.0, the only value allowed)."""
        quantized = isinstance(build, QdrantBuild) and build.quantization != "none"
        return {"hnsw_ef": HNSW_EF_MAX, **({} if quantized else {"oversampling": 1.0})}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """hnsw_ef in [k, 4096]; oversampling (integer steps) in [1, 64] on a quantized
        collection, else [1, 1]."""
        if knob == "oversampling":
            quantized = isinstance(build, QdrantBuild) and build.quantization != "none"
            return 1, OVERSAMPLING_MAX if quantized else 1
        if knob != "hnsw_ef":
            raise unknown_name_error("knob", knob, cls.monotone_knobs, where="backend 'qdrant'")
        k = check_k(k, "backend 'qdrant' knob_range")
        return min(k, HNSW_EF_MAX), HNSW_EF_MAX

    # --- build -----------------------------------------------------------------------------
    def _build(self, x: np.ndarray) -> dict[str, Any]:
        import qdrant_edge as q

        b = self.build_params
        assert isinstance(b, QdrantBuild)
        attrs = self._attrs
        if attrs is not None and attrs.n != x.shape[0]:
            raise DataError(f"backend 'qdrant': attributes have {attrs.n} rows for "
                            f"{x.shape[0]} vectors (one per vector is required)")
        self._payload_attrs, self._filters = None, {}
        base = self.workdir or Path(tempfile.mkdtemp(prefix="rwb-qdrant-"))
        base.mkdir(parents=True, exist_ok=True)  # a caller's folder that is not there yet
        self._dir = Path(tempfile.mkdtemp(prefix="shard-", dir=base))
        self._owned = self.workdir is None
        try:
            shard = q.EdgeShard.create(str(self._dir / "shard"), self._config(self._segments))
            if attrs is not None:  # before the points: the optimizer builds extra links
                create_payload_indexes(shard, attrs)

            def upsert(start: int, stop: int) -> None:
                for s in range(start, stop, UPSERT_BATCH):
                    rows = x[s:min(s + UPSERT_BATCH, stop)]
                    if attrs is None:
                        points = [q.Point(s + i, row) for i, row in enumerate(rows)]
                    else:
                        points = [q.Point(s + i, row, p) for i, (row, p) in
                                  enumerate(zip(rows, payloads(attrs, s, s + len(rows))))]
                    shard.update(q.UpdateOperation.upsert_points(points))

            self._upsert_parts(shard, x.shape[0], upsert)  # N slices for N segments
            shard.optimize()  # blocks until no optimization is planned
            info = shard.info()
        except Exception as exc:
            self._remove_dir()
            raise BackendError(f"backend 'qdrant': the engine refused the build "
                               f"({type(exc).__name__}: {str(exc)[:300]})") from None
        self._shard = shard
        if int(info.indexed_vectors_count) < x.shape[0]:
            self._release()  # the build failed: close the shard, remove its files
            raise BackendError(
                f"backend 'qdrant': Qdrant indexed {info.indexed_vectors_count} of "
                f"{x.shape[0]} vectors after optimizing (indexing_threshold "
                f"{b.indexing_threshold} KB); the rest would be brute-forced"
            )
        self._apply_search_params()
        extra = {"segments": int(info.segments_count),
                 "indexed_vectors": int(info.indexed_vectors_count),
                 "distance": DISTANCE[self.metric], "library": self.library_version()}
        if attrs is not None:
            self._payload_attrs = attrs
            extra["payload_indexes"] = {
                k: {"type": str(v.data_type).rsplit(".", 1)[-1], "points": int(v.points)}
                for k, v in sorted(info.payload_schema.items())}
        return extra

    def _config(self, segments: int) -> Any:
        """This build's ``EdgeConfig`` with ``default_segment_number`` = ``segments``."""
        b = self.build_params
        assert isinstance(b, QdrantBuild)
        return edge_config(self.dim, self.metric, b, self.threads, segments)

    def _apply_search_params(self) -> None:
        sp = self.search_params
        assert isinstance(sp, QdrantSearch)
        b = self.build_params
        assert isinstance(b, QdrantBuild)
        self._params = search_params(sp, b.quantization != "none")
        self._fparams = filtered_search_params(sp, b.quantization != "none")

    def _filtered_params(self) -> Any:
        return self._fparams

    # --- search ----------------------------------------------------------------------------
    def _request(self, k: int) -> Callable[[np.ndarray], Any]:
        import qdrant_edge as q

        params, nearest, req = self._params, q.Query.Nearest, q.QueryRequest
        # qdrant-edge takes a float32 numpy row as is (its stubs say list[float])
        return lambda row: req(limit=k, query=nearest(row), params=params)  # type: ignore[arg-type]

    def _rows(self, hits: list[list[Any]], k: int) -> tuple[np.ndarray, np.ndarray]:
        nq = len(hits)
        if nq == 1:  # the single-query hot path: no per-element array work beyond the row
            return self._row(hits[0], k)
        ids = np.full((nq, k), -1, dtype=np.int64)
        score = np.full((nq, k), np.nan, dtype=np.float64)
        for r, row in enumerate(hits):
            m = min(len(row), k)
            ids[r, :m] = [p.id for p in row[:m]]
            score[r, :m] = [p.score for p in row[:m]]
        d = np.where(ids >= 0, self._distance(score), np.inf).astype(np.float32)
        return d, ids

    def _distance(self, score: np.ndarray) -> np.ndarray:
        """Qdrant scores as rwb distances: l2 squared (Qdrant's Euclid is unsquared), ip
        negated, cosine 1 - similarity (0..2)."""
        if self.metric == "l2":
            return score * score
        if self.metric == "ip":
            return -score
        return 1.0 - score

    def _row(self, row: list[Any], k: int) -> tuple[np.ndarray, np.ndarray]:
        """One query's hits as (1, k) distances (float32, ascending) and ids (-1 padded)."""
        m = min(len(row), k)
        ids = np.full((1, k), -1, dtype=np.int64)
        d = np.full((1, k), np.inf, dtype=np.float32)
        if m:
            ids[0, :m] = [p.id for p in row[:m]]
            d[0, :m] = self._distance(np.array([p.score for p in row[:m]], dtype=np.float64))
        return d, ids

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import qdrant_edge as q

        make = self._request(k)
        if x.shape[0] == 1:
            hits = [self._shard.query(make(x[0]))]
        else:
            hits = self._shard.query_batch(q.QueryBatchRequest([make(row) for row in x]))
        return self._rows(hits, k)

    def _query(self, x: np.ndarray, k: int, flt: Any, params: Any
                ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k under the Qdrant ``Filter`` ``flt`` (see :mod:`._qdrant_filter`)."""
        import qdrant_edge as q

        nearest, req = q.Query.Nearest, q.QueryRequest
        if x.shape[0] == 1:
            hits = [self._shard.query(req(limit=k, query=nearest(x[0]), filter=flt,
                                          params=params))]
        else:
            hits = self._shard.query_batch(q.QueryBatchRequest(
                [req(limit=k, query=nearest(row), filter=flt, params=params)
                 for row in x]))
        return self._rows(hits, k)

    def _hot(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
        make, query = self._request(k), self._shard.query

        def call(x: np.ndarray) -> Any:
            return query(make(x[0]))

        return call, (lambda raw: self._rows([raw], k))

    # --- checks, memory, close ---------------------------------------------------------------
    def verify_not_brute_force(self, queries: np.ndarray, k: int, exact_ids: np.ndarray, *,
                               raise_on_failure: bool = True) -> BruteForceCheck:
        """Recall at hnsw_ef = k vs the most accurate hnsw_ef (see :mod:`._knob_check`)."""
        b = self.build_params
        assert isinstance(b, QdrantBuild)
        return knob_check(self, "hnsw_ef", queries, k, exact_ids, raise_on_failure=raise_on_failure,
                          why=f"full_scan_threshold {b.full_scan_threshold} KB, "
                              f"indexing_threshold {b.indexing_threshold} KB")

    def memory_claim(self) -> MemoryClaim:
        """What the collection should hold in RAM per vector: the quantized codes (scalar: 1
        byte a dimension, binary: 1 bit, product: 4*dim / compression) when ``always_ram``,
        and, unless ``on_disk`` (then memory-mapped, the originals being the on-disk rescoring
        store), the float32 originals and the layer-0 links (2*m uint32)."""
        b = self.build_params
        assert isinstance(b, QdrantBuild)
        d = self.dim
        codes = {"none": 0.0, "scalar": float(d), "binary": (d + 7) // 8,
                 "product": 4.0 * d / int(b.pq_compression[1:])}[b.quantization]
        ram = (codes if b.always_ram else 0.0) + (0.0 if b.on_disk else 4.0 * d + 8.0 * b.m)
        quantized = b.quantization != "none"
        name = {"none": "float32", "scalar": "scalar int8", "binary": "binary",
                "product": f"product {b.pq_compression}"}[b.quantization]
        store = ("disk" if b.on_disk else "ram") if quantized else None
        return MemoryClaim(ram, name, store)

    def memory_facts(self) -> dict[str, Any]:
        """Qdrant's own files for its indexed segments, split by where Qdrant keeps them:
        resident = the quantized codes (``quantized*``, kept in RAM with ``always_ram``), the
        original vectors and the HNSW links (unless ``on_disk``: then they are memory-mapped,
        the originals being the on-disk rescoring store) and the id tracker; disk = those
        files. Bytes. (Payload storage and the
        empty appendable segment's pre-allocated sparse files are not counted.)"""
        if self._dir is None:
            raise ConfigError(f"{self._where()}: memory_facts() called before build()")
        b = self.build_params
        assert isinstance(b, QdrantBuild)
        parts = {"quantized": 0, "vectors": 0, "index": 0, "ids": 0}
        for seg in (self._dir / "shard" / "segments").iterdir():
            if not (seg / "vector_index" / "hnsw_config.json").is_file():
                continue
            for f in seg.rglob("*"):
                if not f.is_file():
                    continue
                rel = f.relative_to(seg).parts
                size = f.stat().st_size
                if rel[0].startswith("vector_storage"):
                    parts["quantized" if f.name.startswith("quantized") else "vectors"] += size
                elif rel[0].startswith("vector_index"):
                    parts["index"] += size
                elif rel[0].startswith("id_tracker"):
                    parts["ids"] += size
        ram = parts["ids"] + (parts["quantized"] if b.always_ram else 0) + (
            0 if b.on_disk else parts["vectors"] + parts["index"])
        return {"resident_bytes": ram, "disk_bytes": sum(parts.values()),
                "source": "Qdrant segment files kept in RAM (quantized codes with always_ram; "
                          "original vectors and HNSW links unless on_disk; id tracker)",
                **{f"{k}_bytes": v for k, v in parts.items()}}

    def memory_bytes(self) -> int:
        """Bytes of Qdrant's files for its indexed segments (see the module docstring)."""
        if self._dir is None:
            return 0
        total = 0
        for seg in (self._dir / "shard" / "segments").iterdir():
            if not (seg / "vector_index" / "hnsw_config.json").is_file():
                continue  # an empty appendable segment (pre-allocated pages only)
            for part in seg.iterdir():
                if part.is_dir() and part.name.startswith(("vector_storage", "vector_index")):
                    total += sum(f.stat().st_size for f in part.rglob("*") if f.is_file())
        return total

    # --- writes (SlotWrites hooks) -------------------------------------------------------------
    def cannot_write(self) -> str | None:
        if getattr(self, "_payload_attrs", None) is not None:
            return "its build carries attributes for filtered search (inserts would have none)"
        return None

    def _built_count(self) -> int:
        return self._n

    def _check_writable(self) -> None:
        self._check_open()
        if self._shard is None:
            raise ConfigError(f"{self._where()}: insert/delete called before build()")

    def _after_writes(self, live: int) -> None:
        self._n = live

    def _update(self, what: str, op: Any) -> None:
        try:
            self._shard.update(op)
        except Exception as exc:
            raise BackendError(f"{self._where()}: the engine refused the {what} "
                               f"({type(exc).__name__}: {str(exc)[:300]})") from None

    def _insert_rows(self, x: np.ndarray, slots: np.ndarray) -> None:
        import qdrant_edge as q

        for s in range(0, x.shape[0], UPSERT_BATCH):
            rows, ids = x[s:s + UPSERT_BATCH], slots[s:s + UPSERT_BATCH].tolist()
            self._update("upsert", q.UpdateOperation.upsert_points(
                [q.Point(i, row) for i, row in zip(ids, rows, strict=True)]))

    def _delete_rows(self, slots: np.ndarray) -> None:
        import qdrant_edge as q

        self._update("delete", q.UpdateOperation.delete_points(slots.tolist()))

    def _maintain(self) -> tuple[str, dict[str, Any]]:
        """Qdrant's optimizers to completion (vacuum, indexing, merges; blocking)."""
        before = self._shard.info()
        try:
            self._shard.optimize()
        except Exception as exc:
            raise BackendError(f"{self._where()}: the optimizer failed "
                               f"({type(exc).__name__}: {str(exc)[:300]})") from None
        after = self._shard.info()
        return "optimize", {
            "segments_before": int(before.segments_count),
            "segments": int(after.segments_count),
            "indexed_vectors_before": int(before.indexed_vectors_count),
            "indexed_vectors": int(after.indexed_vectors_count),
            "points": int(after.points_count)}

    # --- cold runs (retrieval.tune.cold.SupportsColdOpen) ------------------------------------
    def save_cold(self, folder: Path) -> None:
        """Flush the shard and copy its folder into ``folder``."""
        if self._shard is None or self._dir is None:
            raise ConfigError(f"{self._where()}: save_cold() called before build()")
        self._shard.flush()
        shutil.copytree(self._dir / "shard", folder / "shard")

    def open_cold(self, folder: Path, n: int) -> list[Path]:
        """Become the shard saved in ``folder`` (``n`` points): a fresh copy in a folder of
        rwb's, loaded by ``EdgeShard.load`` (with ``on_disk`` its vectors and graph are served
        from the files); returns the copy's files, flushed to disk."""
        import qdrant_edge as q

        self._check_open()
        if self._built:
            self._release()
            self._built = False
        base = self.workdir or Path(tempfile.mkdtemp(prefix="rwb-qdrant-"))
        base.mkdir(parents=True, exist_ok=True)
        self._dir = Path(tempfile.mkdtemp(prefix="shard-", dir=base))
        self._owned = self.workdir is None
        shutil.copytree(folder / "shard", self._dir / "shard")
        files = sorted(f for f in (self._dir / "shard").rglob("*") if f.is_file())
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._shard = q.EdgeShard.load(str(self._dir / "shard"))
        self._ids, self._n, self._built = None, int(n), True
        self._checked_k = self._trusted_k = -1
        self._apply_search_params()
        return files

    def _remove_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir.parent if self._owned else self._dir, ignore_errors=True)
            self._dir = None

    def _release(self) -> None:
        shard, self._shard = self._shard, None
        if shard is not None:
            try:
                shard.close()
            except Exception as exc:  # closing twice or after a failed build
                log.debug("qdrant: close: %r", exc)
        self._remove_dir()


__all__ = ["QdrantIndex", "edge_config"]
