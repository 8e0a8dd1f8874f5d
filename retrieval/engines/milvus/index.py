"""Milvus through pymilvus's MilvusClient: embedded Milvus Lite by default, any server by URI.

Where it connects (first match wins):

1. ``uri=`` given to the constructor in code (a ``.db`` path means Milvus Lite at that path);
2. the environment: ``RWB_MILVUS_URI`` (token from ``RWB_MILVUS_TOKEN``; neither is ever
   written to a log, manifest or exported file, and URIs are reported without credentials);
3. otherwise embedded Milvus Lite in a fresh ``rwb-milvus-<hex>.db`` directory under ``workdir``
   (or a temporary directory). Milvus Lite locks a path per process, so every instance gets its
   own path; :meth:`close` stops that server and deletes the directory.

Index types: HNSW, HNSW_SQ, IVF_FLAT, IVF_SQ8, FLAT, AUTOINDEX (one pydantic model each, see
:mod:`retrieval.engines.milvus.params`), validated before anything reaches Milvus.

Milvus Lite traps this module defeats (each checked, not assumed):

- build params must be nested, ``params={"params": {...}}``, or pymilvus flattens them into
  keys Milvus Lite ignores (defaults used silently). :meth:`build` reads the index back with
  ``describe_index`` and raises :class:`BackendError` unless the params took effect;
- rows still in the memtable are brute-forced (recall 1.0 whatever ef/nprobe). :meth:`build`
  inserts in batches, ``flush()``-es, creates the index, waits until it reports every row
  indexed, then ``release_collection()`` + ``load_collection()`` (a synchronous build/load in
  Lite), and for Lite checks that an index file exists for every data segment;
- :meth:`verify_not_brute_force` checks that recall moves with ef/nprobe, which a silent
  brute-force fallback would not;
- ``describe_index`` in Lite always answers ``state=Finished`` (even for an index it cannot
  build), hence the on-disk check above;
- after ``flush()`` Lite compacts segments in a background thread; :meth:`build` waits for it
  (before indexing and after loading) so measurements never race a background rebuild. Lite
  flushes a segment per 128 MiB memtable; each segment gets its own index (``extra['segments']``);
- pymilvus's ``create_index`` waits with an RPC Lite does not implement (an error traceback in
  the log) and 0.5 s sleeps: rwb passes ``sync=False`` and polls ``describe_index`` itself;
- Lite silently clamps ``nlist`` to the rows of a segment and ignores ``sq_type`` (always SQ8):
  rwb rejects ``nlist > n`` and any ``sq_type`` but SQ8; with ``output_fields=None`` Lite returns
  every vector with the hits, so searches ask for the primary key only;
- unknown index types are stored by ``create_index`` and fail later at load (IVF_PQ: "reserved
  for a future phase"): rejected at validation with the allowed list.

Distances: Milvus "L2" returns the squared Euclidean distance (as rwb's ``l2``); "IP" and
"COSINE" return similarities, converted to ``-ip`` and ``1 - cos``. Embedded runs pin faiss's
OpenMP threads to ``threads`` in every Milvus Lite thread that runs faiss (see ``_milvus_lite``:
a thread count set in the caller's thread does not reach them); 1 thread: reproducible builds.

This module is the registered backend; its helpers are modules beside it: ``params`` (params
models and their checks), ``common`` (names, redaction, log silencer, ids, results), ``build``
(schema, index params, wait, read-back check), ``lite`` (the in-process server and its files on
disk), ``checks`` (the brute-force check), ``filter`` (attributes as fields, filters as
expressions), ``connection`` (where, clients, one-line RPC errors), ``writes`` (inserts,
deletes, maintain).

Writes (:class:`~retrieval.indexes.base.SupportsWrites`): the primary key is the caller's int64
id itself (no mapping). An insert is ``insert`` of the rows (they land in a growing segment,
searched by brute force until flushed and indexed), a delete ``delete(ids=...)`` (Milvus writes
delete records; the rows stay in their sealed segments, filtered out at search, until a
compaction rewrites the segment); rwb keeps the set of live ids to refuse a live id inserted
again or an unknown id deleted before anything reaches Milvus. ``maintain`` is ``flush`` (seals
the growing segment, which is then indexed) + ``compact`` (waits for the job: deleted rows are
removed from the segments) + waiting for the index to cover every live row (and, embedded, for
Milvus Lite's background work). A build with attributes attached (filtered search) takes no
writes (inserts would carry no attributes)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retrieval.data import Metric, as_matrix
from retrieval.engines.milvus.build import (
    check_index_params,
    collection_schema,
    vector_index_params,
    wait_indexed,
)
from retrieval.engines.milvus.checks import brute_force_check
from retrieval.engines.milvus.common import (
    METRIC,
    PK,
    TOKEN_ENV,
    URI_ENV,
    VEC,
    WHERE,
    check_ids,
    quiet_call,
    quiet_pymilvus,
    redact_uri,
    to_result,
)
from retrieval.engines.milvus.connection import MilvusConnection
from retrieval.engines.milvus.filter import MilvusFilter
from retrieval.engines.milvus.lite import (
    InProcessLite,
    collection_bytes,
    lite_files,
    segment_facts,
)
from retrieval.engines.milvus.owned import MILVUS_PROPERTIES
from retrieval.engines.milvus.params import (
    BUILD_KINDS,
    TOPK_MAX,
    HnswBuild,
    HnswSqBuild,
    IvfFlatBuild,
    IvfSq8Build,
    MilvusBuild,
    MilvusSearch,
    check_search,
    default_search,
    merge_search,
    portable_of,
    resolve_build,
    search_model_for,
)
from retrieval.engines.milvus.writes import MilvusWrites
from retrieval.errors import BackendError, ConfigError, param_error
from retrieval.indexes.base import (
    BuildInfo,
    IndexBackend,
    MemoryClaim,
    SearchResult,
)
from retrieval.indexes.brute_check import BruteForceCheck
from retrieval.indexes.portable import Portable
from retrieval.indexes.registry import package_version, register
from retrieval.params import Params

log = logging.getLogger(__name__)

_VIEWS: dict[type[MilvusBuild], type[MilvusIndex]] = {}


@register
class MilvusIndex(MilvusConnection, MilvusWrites, MilvusFilter, IndexBackend):
    """Milvus (Lite embedded or a server by URI). See the module docstring."""

    name = "milvus"
    bench_defaults = ({"index_type": "HNSW", "M": 16, "efConstruction": 200},
                      {"ef": 64})
    export_engine = "milvus"
    family = "hnsw"  # of the default index type; per build: family_for(build)
    BuildParams = MilvusBuild
    SearchParams = MilvusSearch
    #: ef for HNSW kinds, nprobe for IVF kinds (per build: monotone_knobs_for(build))
    monotone_knobs: ClassVar[tuple[str, ...]] = ("ef", "nprobe")
    requires = ("pymilvus",)

    def __init__(
        self,
        dim: int,
        metric: Metric,
        build: Params | None = None,
        *,
        seed: int = 0,
        threads: int = 1,
        workdir: Path | None = None,
        uri: str | None = None,
        token: str | None = None,
        connect_timeout_s: float = 10.0,
        index_timeout_s: float = 600.0,
        query_batch: int = 1024,
        insert_batch: int | None = None,
    ) -> None:
        kind = resolve_build(build)
        super().__init__(dim, metric, kind, seed=seed, threads=threads, workdir=workdir)
        if metric not in METRIC:
            raise param_error("metric", f"one of {', '.join(METRIC)}", metric, where=WHERE)
        if not 1 <= query_batch <= TOPK_MAX:
            raise param_error("query_batch", f"in [1, {TOPK_MAX}]", query_batch, where=WHERE)
        if insert_batch is not None and insert_batch < 1:
            raise param_error("insert_batch", ">= 1 or None", insert_batch, where=WHERE)
        self.build_params: MilvusBuild = kind
        self.search_params = default_search(kind)
        target = uri or os.environ.get(URI_ENV) or None
        # like pymilvus: a path ending in .db is Milvus Lite, anything else a server URI
        self._embedded = target is None or target.endswith(".db")
        self._uri = target
        self._token = (token or os.environ.get(TOKEN_ENV, "")) if not self._embedded else ""
        self.connect_timeout_s = float(connect_timeout_s)
        self.index_timeout_s = float(index_timeout_s)
        self.query_batch = int(query_batch)
        #: rows per insert call (default: about 8 MiB of vectors)
        self.insert_batch = insert_batch or max(1, min(50_000, (8 << 20) // (4 * dim)))
        self.collection = f"rwb_{uuid.uuid4().hex[:12]}"
        self._client: Any = None
        self._aclient: Any = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._db_path: Path | None = None
        self._lite: InProcessLite | None = None
        self._owned_dirs: list[Path] = []
        self._built_n = 0
        #: live primary keys (None until the first write: then the build's ids)
        self._live: set[int] | None = None
        self._build_ids: np.ndarray | None = None

    # --- class hooks ----------------------------------------------------------------------
    @classmethod
    def library_version(cls) -> str:
        lite = package_version("milvus-lite")
        return f"pymilvus {package_version('pymilvus')}; milvus-lite {lite or 'not installed'}"

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable | None:
        """Export mapping of a Milvus index definition (see ``_milvus_params.portable_of``)."""
        return portable_of(build, search)

    @classmethod
    def family_for(cls, build: Params | None) -> str:
        return resolve_build(build).family

    @classmethod
    def monotone_knobs_for(cls, build: Params | None) -> tuple[str, ...]:
        knob = resolve_build(build).knob
        return (knob,) if knob else ()

    @classmethod
    def specialized(cls, build: Params | None) -> type[MilvusIndex]:
        """This class as seen for one build: ``family``, ``monotone_knobs`` and ``SearchParams``
        of that index type (the registered class must declare the union of every kind's).
        For code that reads class attributes (a tuner, the conformance suite); instances of it
        behave as instances of :class:`MilvusIndex`. Not registered."""
        kind = type(resolve_build(build))
        view = _VIEWS.get(kind)
        if view is None:
            sample = kind()
            attrs = {
                "family": sample.family,
                "monotone_knobs": cls.monotone_knobs_for(sample),
                "SearchParams": search_model_for(sample),
                "__module__": cls.__module__,
                "__doc__": f"MilvusIndex specialised to index_type {sample.index_type}.",
            }
            view = type(f"MilvusIndex_{sample.index_type}", (cls,), attrs)
            _VIEWS[kind] = view
        return view

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        check_search(build, search, k)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        return resolve_build(build).most_accurate()

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        kind = resolve_build(build)
        if knob != kind.knob:
            allowed = kind.knob or "none"
            raise ConfigError(
                f"{WHERE}: knob '{knob}' does not apply to index_type {kind.index_type}; "
                f"allowed: {allowed}"
            )
        return kind.knob_bounds(k)

    # --- build ----------------------------------------------------------------------
    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> BuildInfo:
        """Insert, flush, index, wait, release + load; verify the params took effect.

        ``build_s`` (seconds) spans insert to loaded; ``extra`` splits it (``insert_s``,
        ``flush_s``, ``index_s``, ``load_s``). ``memory_bytes``: see :meth:`memory_bytes`.
        """
        x = as_matrix(vectors, f"{WHERE} build vectors", dim=self.dim)
        n = int(x.shape[0])
        pk = check_ids(ids, n)
        kind = self.build_params
        if isinstance(kind, IvfFlatBuild) and kind.nlist > n:
            raise param_error(
                "nlist", f"<= the number of vectors ({n})", kind.nlist,
                where=f"{WHERE} build params",
            )
        client = self.connect()
        if self._built_n:
            self._call("drop_collection", client.drop_collection, self.collection)
            self._built_n = 0
        if self._call("has_collection", client.has_collection, self.collection):
            raise BackendError(f"{WHERE}: Milvus at {self.where} already has a collection "
                               f"'{self.collection}'; rwb never takes or drops a collection it "
                               f"did not create")
        schema = self._add_attribute_fields(collection_schema(client, self.dim))
        self._call("create_collection", client.create_collection, self.collection, schema=schema,
                   properties=MILVUS_PROPERTIES)
        self._built_n = n
        self._live, self._build_ids = None, pk
        pinned = self._pin_lite_background()
        t0 = time.perf_counter_ns()
        batch = self.insert_batch
        for s in range(0, n, batch):
            rows = self._attribute_rows(
                [{PK: i, VEC: v} for i, v in zip(pk[s:s + batch].tolist(), x[s:s + batch])], s)
            self._call("insert", client.insert, self.collection, rows)
        t1 = time.perf_counter_ns()
        self._call("flush", client.flush, self.collection)
        drained = self._drain_lite_background()
        t2 = time.perf_counter_ns()
        index_params = vector_index_params(client, kind, METRIC[self.metric])
        # sync=False: pymilvus's own wait calls AllocTimestamp (not implemented by Milvus Lite,
        # logged as an error by its server) and sleeps 0.5 s per poll; poll describe_index here
        self._call(
            "create_index", client.create_index, self.collection, index_params, sync=False
        )
        self._wait_indexed(n)
        t3 = time.perf_counter_ns()
        self._call("release_collection", client.release_collection, self.collection)
        self._call("load_collection", client.load_collection, self.collection)
        t4 = time.perf_counter_ns()
        drained = self._drain_lite_background() and drained
        self.verify_index_params()
        extra: dict[str, Any] = {
            "index_type": kind.index_type,
            "milvus_params": kind.milvus_params(),
            "metric_type": METRIC[self.metric],
            "mode": "embedded" if self._embedded else "server",
            "where": self.where,
            "library": self.library_version(),
            "insert_s": (t1 - t0) / 1e9,
            "flush_s": (t2 - t1) / 1e9,
            "index_s": (t3 - t2) / 1e9,
            "load_s": (t4 - t3) / 1e9,
            # faiss (OpenMP) threads per Milvus Lite worker thread; None: not controlled here
            "threads": self.threads if pinned else None,
        }
        memory: int | None = None
        if self._embedded:
            memory, facts = segment_facts(self._db_path, self.collection, n, kind.index_type,
                                          self.where, drained)
            extra.update(facts)
        return BuildInfo(n=n, build_s=(t4 - t0) / 1e9, memory_bytes=memory, extra=extra)

    def _drain_lite_background(self) -> bool:
        """Embedded only: wait for Milvus Lite's post-flush background work (compaction of
        segments, index builds on merged segments) so that the segment set is final before the
        index is built and loaded, and measurements do not race a background rebuild. Returns
        False when not possible (server mode, or Milvus Lite internals moved)."""
        if self._lite is None:
            return False
        try:
            self._lite.drain(self.collection, self.index_timeout_s)
        except Exception as exc:  # internals moved: the on-disk checks still run
            log.warning("milvus: cannot wait for Milvus Lite background work: %r", exc)
            return False
        return True

    def _pin_lite_background(self) -> bool:
        """Pin faiss threads in the collection's background worker (embedded); True when every
        Milvus Lite thread that runs faiss for this collection is pinned to ``threads``."""
        if self._lite is None:
            return False
        try:
            self._lite.pin_background(self.collection)
        except Exception as exc:
            log.warning("milvus: cannot pin Milvus Lite's background thread: %r", exc)
            return False
        return True

    def _wait_indexed(self, n: int) -> dict[str, Any]:
        return wait_indexed(
            lambda: self._call("describe_index", self._client.describe_index, self.collection,
                               VEC),
            n, self.index_timeout_s, self.where,
        )

    def verify_index_params(self) -> dict[str, Any]:
        """Read the index back (``describe_index``) and raise BackendError unless its type,
        metric and every build param are the ones sent (flat ``params`` are silently dropped
        by Milvus Lite, which then builds with its defaults). Returns the description."""
        if self._client is None or not self._built_n:
            raise ConfigError(f"{WHERE}: verify_index_params() called before build()")
        info = self._call("describe_index", self._client.describe_index, self.collection, VEC)
        info = dict(info or {})
        check_index_params(info, self.build_params, METRIC[self.metric], self.where)
        return info

    def _lite_files(self) -> tuple[list[Path], list[Path]]:
        return lite_files(self._db_path, self.collection)

    def memory_bytes(self) -> int:
        """Embedded only: bytes of the serialized index files Milvus Lite loads to search
        (faiss structures, comparable with the faiss backends' serialized size; the raw rows
        in parquet are not counted, see ``BuildInfo.extra['disk_bytes']``). A server's memory
        cannot be measured from here: BackendError."""
        if not self._embedded:
            raise BackendError(f"{WHERE}: memory of a Milvus server cannot be measured here")
        if not self._built_n:
            raise ConfigError(f"{WHERE}: memory_bytes() called before build()")
        return sum(p.stat().st_size for p in self._lite_files()[1])

    def memory_claim(self) -> MemoryClaim:
        """What the index type holds per row (bytes), from its params alone: the vector (4
        bytes a dimension; 1 for the SQ8 kinds) + an int64 id, + layer-0 links (2*M int32
        neighbours) for the HNSW kinds (AUTOINDEX is HNSW M 16 in Milvus Lite). There is no
        refine copy: Milvus Lite's SQ8 kinds rank by the SQ8 distances."""
        b = self.build_params
        sq = isinstance(b, HnswSqBuild | IvfSq8Build)
        per = (1.0 if sq else 4.0) * self.dim + 8.0
        if isinstance(b, HnswBuild):
            per += 8.0 * b.M
        elif b.index_type == "AUTOINDEX":
            per += 8.0 * 16
        encoding = "SQ8" if sq else "float32"
        return MemoryClaim(per, f"{b.index_type} ({encoding})", None)

    def memory_facts(self) -> dict[str, Any]:
        """Milvus Lite's own files: ``resident_bytes`` = the index files it loads to search
        (the faiss structures of every segment); ``disk_bytes`` = the collection's folder
        (raw rows in parquet + index files). A server's memory is not measured from here
        (``resident_bytes`` None: the doctor says ``unmeasured``)."""
        if not self._built_n:
            raise ConfigError(f"{WHERE}: memory_facts() called before build()")
        if not self._embedded:
            return {"resident_bytes": None, "disk_bytes": None,
                    "source": "a Milvus server (its memory is not measured from here)"}
        return {"resident_bytes": self.memory_bytes(),
                "disk_bytes": collection_bytes(self._db_path, self.collection),
                "source": "Milvus Lite index files of the collection (the faiss structures "
                          "it loads to search); disk: the collection folder"}

    # --- search ----------------------------------------------------------------------
    def set_search_params(self, **params: Any) -> None:
        """Validate against the knobs of this index type (``ef`` / ``nprobe`` / none)."""
        self.search_params = merge_search(self.build_params, self.search_params, params)

    def _prepare(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, dict[str, Any]]:
        if self._closed:
            raise BackendError(f"{WHERE}: index is closed")
        if not self._built_n:
            raise ConfigError(f"{WHERE}: search() called before build()")
        q = as_matrix(queries, f"{WHERE} search queries", dim=self.dim)
        self.check_combination(self.build_params, self.search_params, k)
        return q, {"params": self.search_params.model_dump()}

    def _search_kwargs(self, chunk: np.ndarray, k: int, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "collection_name": self.collection, "data": chunk, "limit": int(k),
            "anns_field": VEC, "output_fields": [PK], "search_params": params,
        }

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k, ``query_batch`` queries per call (Milvus Lite costs ~2-10 ms per call)."""
        q, params = self._prepare(queries, k)
        parts = []
        for s in range(0, len(q), self.query_batch):
            chunk = q[s:s + self.query_batch]
            res = self._call("search", self._client.search, **self._search_kwargs(chunk, k, params))
            parts.append(res)
        return to_result(parts, len(q), k, self.metric)

    async def asearch(self, queries: np.ndarray, k: int) -> SearchResult:
        """Same as :meth:`search` through pymilvus's AsyncMilvusClient (grpc.aio), which works
        against Milvus Lite too (its gRPC server runs in this process's threads, so concurrent
        calls overlap waiting, not compute). One async client per running event loop."""
        q, params = self._prepare(queries, k)
        client = await self._async_client()
        parts = []
        for s in range(0, len(q), self.query_batch):
            chunk = q[s:s + self.query_batch]
            try:
                with quiet_call():
                    res = await client.search(**self._search_kwargs(chunk, k, params))
            except Exception as exc:
                raise BackendError(
                    f"{WHERE}: async search failed on {self.where}: {type(exc).__name__}: "
                    f"{self._scrub(str(exc))[:300]}"
                ) from None
            parts.append(res)
        return to_result(parts, len(q), k, self.metric)

    # --- brute-force check ----------------------------------------------------------------------
    def verify_not_brute_force(
        self, queries: np.ndarray, k: int, exact_ids: np.ndarray, *, raise_on_failure: bool = True
    ) -> BruteForceCheck:
        """Search at the lowest and highest value of the index's knob (ef = k vs the most
        accurate ef; nprobe = 1 vs nlist) and compare recall@k against ``exact_ids``.

        A working ANN index answers differently at the two ends (recall at the low end is
        usually < 1). Exact answers with identical ids at both ends are the signature of a
        silent brute-force fallback (unflushed rows, dropped params): ``ok`` is False and, by
        default, BackendError is raised. FLAT is exact by design and AUTOINDEX has no exposed
        knob: both return ``ok=True`` with the reason. The search params are restored after.
        Use queries for which the low end is not trivially exact (a few dozen suffice).
        """
        return brute_force_check(self, queries, k, exact_ids, raise_on_failure=raise_on_failure)

    # --- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Drop the collection, close the clients, stop this instance's Milvus Lite server and
        delete the directory it created. Idempotent; never raises for a dead server."""
        if self._closed:
            return
        self._closed = True
        self._close_async_outside_loop()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception), quiet_pymilvus():
                if self._built_n:
                    client.drop_collection(self.collection)
            with contextlib.suppress(Exception), quiet_pymilvus():
                client.close()
        self._built_n = 0
        if self._lite is not None:
            self._lite.stop()
            self._lite = None
        elif self._embedded and self._db_path is not None:
            with contextlib.suppress(Exception):
                from milvus_lite import server_manager_instance

                server_manager_instance.release_server(str(self._db_path))
        for d in self._owned_dirs:
            shutil.rmtree(d, ignore_errors=True)
        self._owned_dirs = []
        super().close()

    def __enter__(self) -> MilvusIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never shows the token
        return (
            f"MilvusIndex(dim={self.dim}, metric={self.metric!r}, "
            f"index_type={self.build_params.index_type!r}, where={self.where!r})"
        )


__all__ = ["BUILD_KINDS", "BruteForceCheck", "MilvusIndex", "quiet_pymilvus", "redact_uri"]
