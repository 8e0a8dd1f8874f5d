"""Milvus through pymilvus's MilvusClient: embedded Milvus Lite by default, any server by URI.

Where it connects (first match wins):

1. ``uri=`` given to the constructor in code (a ``.db`` path means Milvus Lite at that path);
2. the environment: ``RWB_MILVUS_URI`` (token from ``RWB_MILVUS_TOKEN``; neither is ever
   written to a log, manifest or exported file, and URIs are reported without credentials);
3. otherwise embedded Milvus Lite in a fresh ``rwb-milvus-<hex>.db`` directory under ``workdir``
   (or a temporary directory). Milvus Lite locks a path per process, so every instance gets its
   own path; :meth:`close` stops that server and deletes the directory.

Index types: HNSW, HNSW_SQ, IVF_FLAT, IVF_SQ8, FLAT, AUTOINDEX (one pydantic model each, see
:mod:`retrieval.indexes._milvus_params`), validated before anything reaches Milvus.

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
OpenMP threads to ``threads`` in every Milvus Lite thread that runs faiss (see
:mod:`retrieval.indexes._milvus_lite`: a thread count set in the caller's thread does not
reach them); with 1 thread builds are reproducible.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from retrieval.data import Metric, as_matrix
from retrieval.errors import BackendError, ConfigError, DataError, param_error
from retrieval.indexes._milvus_lite import InProcessLite
from retrieval.indexes._milvus_params import (
    BUILD_KINDS,
    TOPK_MAX,
    IvfFlatBuild,
    MilvusBuild,
    MilvusSearch,
    default_search,
    portable_of,
    resolve_build,
    search_model_for,
)
from retrieval.indexes.base import BuildInfo, IndexBackend, SearchResult
from retrieval.indexes.portable import Portable
from retrieval.indexes.registry import package_version, register
from retrieval.params import Params, validate_params

log = logging.getLogger(__name__)

URI_ENV = "RWB_MILVUS_URI"
TOKEN_ENV = "RWB_MILVUS_TOKEN"
_METRIC = {"l2": "L2", "ip": "IP", "cosine": "COSINE"}
_PK, _VEC = "id", "vec"
_WHERE = "backend 'milvus'"


def redact_uri(uri: str) -> str:
    """``uri`` without user/password and query string (safe to log or raise)."""
    if "://" not in uri:
        return uri
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


_QUIET_LOCK = threading.Lock()
_QUIET_DEPTH = 0
_QUIET_SAVED: dict[str, int] = {}
_NOISY_LOGGERS = ("pymilvus", "milvus_lite", "grpc._server")


@contextlib.contextmanager
def quiet_pymilvus() -> Iterator[None]:
    """Silence pymilvus/milvus-lite loggers (they log a traceback for every failed RPC, even
    one the caller catches) while the block runs; the error is raised to the caller instead."""
    global _QUIET_DEPTH
    with _QUIET_LOCK:
        if _QUIET_DEPTH == 0:
            for name in _NOISY_LOGGERS:
                logger = logging.getLogger(name)
                _QUIET_SAVED[name] = logger.level
                logger.setLevel(logging.CRITICAL + 1)
        _QUIET_DEPTH += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _QUIET_DEPTH -= 1
            if _QUIET_DEPTH == 0:
                for name, level in _QUIET_SAVED.items():
                    logging.getLogger(name).setLevel(level)


@dataclass(frozen=True)
class BruteForceCheck:
    """Outcome of :meth:`MilvusIndex.verify_not_brute_force`.

    Recall is id-intersection recall@k (mean over queries, 0..1) at the lowest and the highest
    value of the knob; ``ok`` is False when the index answered exactly at both ends with
    identical ids, the signature of a silent brute-force fallback.
    """

    ok: bool
    knob: str
    low: int
    high: int
    recall_low: float
    recall_high: float
    identical: bool
    reason: str
    extra: dict[str, Any] = field(default_factory=dict)


def _recall(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    hits = [
        len(set(f[f >= 0].tolist()) & set(e[:k][e[:k] >= 0].tolist()))
        for f, e in zip(found, exact)
    ]
    return float(np.mean(hits) / k)


_VIEWS: dict[type[MilvusBuild], type[MilvusIndex]] = {}


@register
class MilvusIndex(IndexBackend):
    """Milvus (Lite embedded or a server by URI). See the module docstring."""

    name = "milvus"
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
        if metric not in _METRIC:
            raise param_error("metric", f"one of {', '.join(_METRIC)}", metric, where=_WHERE)
        if not 1 <= query_batch <= TOPK_MAX:
            raise param_error("query_batch", f"in [1, {TOPK_MAX}]", query_batch, where=_WHERE)
        if insert_batch is not None and insert_batch < 1:
            raise param_error("insert_batch", ">= 1 or None", insert_batch, where=_WHERE)
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
        kind = resolve_build(build)
        where = f"{_WHERE} search params (index_type {kind.index_type})"
        if not isinstance(k, int | np.integer) or not 1 <= int(k) <= TOPK_MAX:
            raise param_error("k", f"an integer in [1, {TOPK_MAX}]", k, where=where)
        values = {key: v for key, v in search.model_dump().items() if v is not None}
        sp = validate_params(search_model_for(kind), values, where=where)
        ef = getattr(sp, "ef", None)
        if ef is not None and ef < k:
            note = "" if "ef" in values else " (the default ef; set ef explicitly)"
            raise param_error("ef", f">= k ({k}){note}", ef, where=where)
        nprobe = getattr(sp, "nprobe", None)
        if nprobe is not None and isinstance(kind, IvfFlatBuild) and nprobe > kind.nlist:
            raise param_error("nprobe", f"<= nlist ({kind.nlist})", nprobe, where=where)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        return resolve_build(build).most_accurate()

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        kind = resolve_build(build)
        if knob != kind.knob:
            allowed = kind.knob or "none"
            raise ConfigError(
                f"{_WHERE}: knob '{knob}' does not apply to index_type {kind.index_type}; "
                f"allowed: {allowed}"
            )
        return kind.knob_bounds(k)

    # --- connection ----------------------------------------------------------------------
    @property
    def where(self) -> str:
        """Where the data lives, safe to log: the Lite path or the URI without credentials."""
        if self._embedded:
            return str(self._db_path or self._uri or "(milvus lite, not started)")
        return redact_uri(str(self._uri))

    @property
    def embedded(self) -> bool:
        return self._embedded

    def _scrub(self, text: str) -> str:
        if self._token:
            text = text.replace(self._token, "***")
        if self._uri and not self._embedded:
            text = text.replace(self._uri, redact_uri(self._uri))
        return text

    def connect(self) -> Any:
        """Open the client (idempotent); raise BackendError naming where, within the timeout."""
        if self._closed:
            raise BackendError(f"{_WHERE}: index is closed")
        if self._client is not None:
            return self._client
        from pymilvus import MilvusClient

        if self._embedded:
            self._client = self._open_lite(MilvusClient)
            return self._client
        t0 = time.perf_counter()
        try:
            with quiet_pymilvus():
                self._client = MilvusClient(
                    uri=self._uri, token=self._token, timeout=self.connect_timeout_s,
                    dedicated=True,
                )
        except Exception as exc:
            waited = time.perf_counter() - t0
            raise BackendError(
                f"{_WHERE}: cannot connect to Milvus at {self.where} (timeout "
                f"{self.connect_timeout_s:g} s, gave up after {waited:.1f} s): "
                f"{self._scrub(str(exc))[:300]}"
            ) from None
        return self._client

    def _open_lite(self, client_cls: Any) -> Any:
        try:
            import milvus_lite  # noqa: F401
        except ImportError:
            raise BackendError(
                f"{_WHERE}: embedded mode needs milvus-lite (pip install "
                f"'retrieval-workbench[milvus]'), or set {URI_ENV} to a Milvus server"
            ) from None
        if self._uri is not None:
            path = Path(self._uri)
        else:
            base = self.workdir
            if base is None:
                base = Path(tempfile.mkdtemp(prefix="rwb-milvus-"))
                self._owned_dirs.append(base)
            base.mkdir(parents=True, exist_ok=True)
            path = base / f"rwb-milvus-{uuid.uuid4().hex[:12]}.db"
            self._owned_dirs.insert(0, path)
        self._db_path = path.resolve()
        try:
            with quiet_pymilvus():
                try:
                    self._lite = InProcessLite.start(self._db_path, self.threads)
                except (ImportError, AttributeError) as exc:  # Milvus Lite internals moved
                    log.warning("milvus: serving Milvus Lite through pymilvus (%r); faiss "
                                "threads in its worker threads are not pinned", exc)
                    return client_cls(str(self._db_path), timeout=self.connect_timeout_s)
                return client_cls(uri=self._lite.uri, timeout=self.connect_timeout_s,
                                  dedicated=True)
        except Exception as exc:
            raise BackendError(
                f"{_WHERE}: cannot open Milvus Lite at {self._db_path} ({type(exc).__name__}: "
                f"{str(exc)[:300]}); Milvus Lite locks a path per process: use one path per "
                f"process, or run `milvus-lite server` and connect by URI"
            ) from None

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one RPC; a failure becomes a one-line BackendError (pymilvus's own traceback
        logging is silenced, except on the search hot path)."""
        quiet = quiet_pymilvus() if what != "search" else contextlib.nullcontext()
        try:
            with quiet:
                return fn(*args, **kwargs)
        except Exception as exc:
            if isinstance(exc, BackendError | ConfigError | DataError):
                raise
            raise BackendError(
                f"{_WHERE}: {what} failed on {self.where}: {type(exc).__name__}: "
                f"{self._scrub(str(exc))[:300]}"
            ) from None

    # --- build ----------------------------------------------------------------------
    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> BuildInfo:
        """Insert, flush, index, wait, release + load; verify the params took effect.

        ``build_s`` (seconds) spans insert to loaded; ``extra`` splits it (``insert_s``,
        ``flush_s``, ``index_s``, ``load_s``). ``memory_bytes``: see :meth:`memory_bytes`.
        """
        x = as_matrix(vectors, f"{_WHERE} build vectors", dim=self.dim)
        n = int(x.shape[0])
        pk = self._check_ids(ids, n)
        kind = self.build_params
        if isinstance(kind, IvfFlatBuild) and kind.nlist > n:
            raise param_error(
                "nlist", f"<= the number of vectors ({n})", kind.nlist,
                where=f"{_WHERE} build params",
            )
        client = self.connect()
        if self._built_n:
            self._call("drop_collection", client.drop_collection, self.collection)
            self._built_n = 0
        from pymilvus import DataType

        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(_PK, DataType.INT64, is_primary=True)
        schema.add_field(_VEC, DataType.FLOAT_VECTOR, dim=self.dim)
        self._call("create_collection", client.create_collection, self.collection, schema=schema)
        self._built_n = n
        pinned = self._pin_lite_background()
        t0 = time.perf_counter_ns()
        batch = self.insert_batch
        for s in range(0, n, batch):
            rows = [{_PK: i, _VEC: v} for i, v in zip(pk[s:s + batch].tolist(), x[s:s + batch])]
            self._call("insert", client.insert, self.collection, rows)
        t1 = time.perf_counter_ns()
        self._call("flush", client.flush, self.collection)
        drained = self._drain_lite_background()
        t2 = time.perf_counter_ns()
        index_params = client.prepare_index_params()
        index_params.add_index(
            field_name=_VEC, index_type=kind.index_type, index_name=_VEC,
            metric_type=_METRIC[self.metric], params={"params": kind.milvus_params()},
        )
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
            "metric_type": _METRIC[self.metric],
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
            segments, index_files = self._lite_files()
            if len(index_files) < len(segments):
                raise BackendError(
                    f"{_WHERE}: Milvus Lite holds {len(segments)} data segment(s) but only "
                    f"{len(index_files)} index file(s) after load at {self.where}: searches "
                    f"would be brute-forced"
                )
            memory = sum(p.stat().st_size for p in index_files)
            extra["segments"] = len(segments)
            extra["background_drained"] = drained
            if len(segments) > 1:
                log.warning(
                    "milvus: Milvus Lite split %d rows into %d segments (memtable limit); each "
                    "segment has its own %s index and results are merged, so recall per "
                    "ef/nprobe differs from one index over all rows", n, len(segments),
                    kind.index_type,
                )
            extra["disk_bytes"] = self._collection_bytes()
            extra["memory_kind"] = "serialized index files of the loaded collection (bytes)"
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

    @staticmethod
    def _check_ids(ids: np.ndarray | None, n: int) -> np.ndarray:
        if ids is None:
            return np.arange(n, dtype=np.int64)
        arr = np.asarray(ids)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise DataError(f"{_WHERE} build ids: expected shape ({n},); received {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise DataError(f"{_WHERE} build ids: expected integers; received dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        if (arr == -1).any():
            raise DataError(f"{_WHERE} build ids: -1 is reserved for 'no result'")
        if np.unique(arr).shape[0] != n:
            raise DataError(f"{_WHERE} build ids: must be unique (Milvus primary keys)")
        return arr

    def _wait_indexed(self, n: int) -> dict[str, Any]:
        """Poll describe_index until every row is indexed (a server builds in the background;
        Milvus Lite answers Finished at once, its build happens at load)."""
        deadline = time.monotonic() + self.index_timeout_s
        delay = 0.05
        while True:
            info = self._call(
                "describe_index", self._client.describe_index, self.collection, _VEC
            ) or {}
            state = str(info.get("state", ""))
            if state.endswith("Failed"):
                raise BackendError(
                    f"{_WHERE}: index build failed on {self.where}: "
                    f"{info.get('index_state_fail_reason', '')}"
                )
            indexed = int(info.get("indexed_rows", 0) or 0)
            pending = int(info.get("pending_index_rows", 0) or 0)
            if state.endswith("Finished") and indexed >= n and pending == 0:
                return dict(info)
            if time.monotonic() > deadline:
                raise BackendError(
                    f"{_WHERE}: index not built after {self.index_timeout_s:g} s on "
                    f"{self.where} (state {state}, {indexed}/{n} rows indexed)"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def verify_index_params(self) -> dict[str, Any]:
        """Read the index back (``describe_index``) and raise BackendError unless its type,
        metric and every build param are the ones sent (flat ``params`` are silently dropped
        by Milvus Lite, which then builds with its defaults). Returns the description."""
        if self._client is None or not self._built_n:
            raise ConfigError(f"{_WHERE}: verify_index_params() called before build()")
        info = self._call("describe_index", self._client.describe_index, self.collection, _VEC)
        info = dict(info or {})
        kind = self.build_params
        got_type = str(info.get("index_type", ""))
        sent = kind.milvus_params()
        got = info.get("params") or {}
        if isinstance(got, str):
            import json

            got = json.loads(got)
        mismatch = {
            k: (v, got.get(k)) for k, v in sent.items() if str(got.get(k)) != str(v)
        }
        if got_type != kind.index_type or mismatch:
            raise BackendError(
                f"{_WHERE}: index params did not take effect on {self.where}: sent "
                f"index_type {kind.index_type} {sent}; Milvus reports index_type {got_type} "
                f"{got} (mismatched: {mismatch})"
            )
        if str(info.get("metric_type", "")) != _METRIC[self.metric]:
            raise BackendError(
                f"{_WHERE}: metric did not take effect on {self.where}: sent "
                f"{_METRIC[self.metric]}, Milvus reports {info.get('metric_type')}"
            )
        return info

    def _collection_dir(self) -> Path | None:
        if self._db_path is None:
            return None
        hits = list(self._db_path.glob(f"**/collections/{self.collection}"))
        return hits[0] if hits else None

    def _lite_files(self) -> tuple[list[Path], list[Path]]:
        root = self._collection_dir()
        if root is None:
            return [], []
        segments = sorted(root.glob("partitions/*/data/*.parquet"))
        index_files = sorted(p for p in root.glob("partitions/*/indexes/*") if p.is_file())
        return segments, index_files

    def _collection_bytes(self) -> int:
        root = self._collection_dir()
        if root is None:
            return 0
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())

    def memory_bytes(self) -> int:
        """Embedded only: bytes of the serialized index files Milvus Lite loads to search
        (faiss structures, comparable with the faiss backends' serialized size; the raw rows
        in parquet are not counted, see ``BuildInfo.extra['disk_bytes']``). A server's memory
        cannot be measured from here: BackendError."""
        if not self._embedded:
            raise BackendError(f"{_WHERE}: memory of a Milvus server cannot be measured here")
        if not self._built_n:
            raise ConfigError(f"{_WHERE}: memory_bytes() called before build()")
        return sum(p.stat().st_size for p in self._lite_files()[1])

    # --- search ----------------------------------------------------------------------
    def set_search_params(self, **params: Any) -> None:
        """Validate against the knobs of this index type (``ef`` / ``nprobe`` / none)."""
        kind = self.build_params
        where = f"{_WHERE} search params (index_type {kind.index_type})"
        given = {key: v for key, v in params.items() if v is not None}  # MilvusSearch's Nones
        if given and not kind.knob:
            raise ConfigError(
                f"{where}: index_type {kind.index_type} takes no search params (allowed: none); "
                f"received {sorted(given)}"
            )
        merged = {**self.search_params.model_dump(), **given}
        sp = validate_params(search_model_for(kind), merged, where=where)
        nprobe = getattr(sp, "nprobe", None)
        if isinstance(kind, IvfFlatBuild) and nprobe is not None and nprobe > kind.nlist:
            raise param_error("nprobe", f"<= nlist ({kind.nlist})", nprobe, where=where)
        self.search_params = sp

    def _prepare(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, dict[str, Any]]:
        if self._closed:
            raise BackendError(f"{_WHERE}: index is closed")
        if not self._built_n:
            raise ConfigError(f"{_WHERE}: search() called before build()")
        q = as_matrix(queries, f"{_WHERE} search queries", dim=self.dim)
        self.check_combination(self.build_params, self.search_params, k)
        return q, {"params": self.search_params.model_dump()}

    def _search_kwargs(self, chunk: np.ndarray, k: int, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "collection_name": self.collection, "data": chunk, "limit": int(k),
            "anns_field": _VEC, "output_fields": [_PK], "search_params": params,
        }

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k, ``query_batch`` queries per call (Milvus Lite costs ~2-10 ms per call)."""
        q, params = self._prepare(queries, k)
        parts = []
        for s in range(0, len(q), self.query_batch):
            chunk = q[s:s + self.query_batch]
            res = self._call("search", self._client.search, **self._search_kwargs(chunk, k, params))
            parts.append(res)
        return self._to_result(parts, len(q), k)

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
                res = await client.search(**self._search_kwargs(chunk, k, params))
            except Exception as exc:
                raise BackendError(
                    f"{_WHERE}: async search failed on {self.where}: {type(exc).__name__}: "
                    f"{self._scrub(str(exc))[:300]}"
                ) from None
            parts.append(res)
        return self._to_result(parts, len(q), k)

    async def _async_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._aclient is not None and self._aloop is loop:
            return self._aclient
        await self._aclose_client()
        from pymilvus import AsyncMilvusClient

        if self._lite is not None:
            target = self._lite.uri
        else:
            target = str(self._db_path) if self._embedded else str(self._uri)
        client = AsyncMilvusClient(
            uri=target, token=self._token, timeout=self.connect_timeout_s, dedicated=True
        )
        self._aclient, self._aloop = client, loop
        return client

    async def _aclose_client(self) -> None:
        client, loop = self._aclient, self._aloop
        self._aclient, self._aloop = None, None
        if client is None:
            return
        if loop is asyncio.get_running_loop():
            with contextlib.suppress(Exception), quiet_pymilvus():
                await client.close()

    async def aclose(self) -> None:
        """Close the async client inside its loop, then everything else (:meth:`close`)."""
        await self._aclose_client()
        self.close()

    def _to_result(self, parts: list[Any], nq: int, k: int) -> SearchResult:
        ids = np.full((nq, k), -1, dtype=np.int64)
        dist = np.full((nq, k), np.inf, dtype=np.float32)
        row = 0
        for res in parts:
            for hits in res:
                m = min(len(hits.ids), k)
                if m:
                    ids[row, :m] = np.asarray(hits.ids[:m], dtype=np.int64)
                    dist[row, :m] = np.asarray(hits.distances[:m], dtype=np.float32)
                row += 1
        if row != nq:
            raise BackendError(f"{_WHERE}: Milvus answered {row} result lists for {nq} queries")
        valid = ids >= 0
        if self.metric == "ip":
            dist = np.where(valid, -dist, np.inf)
        elif self.metric == "cosine":
            dist = np.where(valid, 1.0 - dist, np.inf)
        dist = dist.astype(np.float32, copy=False)
        order = np.argsort(dist, axis=1, kind="stable")
        ids = np.take_along_axis(ids, order, axis=1)
        dist = np.take_along_axis(dist, order, axis=1)
        return SearchResult(ids=ids, distances=dist)

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
        kind = self.build_params
        exact = np.asarray(exact_ids)[:, :k]
        if not kind.knob:
            return BruteForceCheck(True, "", 0, 0, float("nan"), float("nan"), False,
                                   f"index_type {kind.index_type} has no search knob to vary")
        low, high = self.knob_range(kind.knob, kind, k)
        high = min(high, int(kind.most_accurate()[kind.knob]))
        saved = self.search_params
        try:
            self.set_search_params(**{kind.knob: low})
            t0 = time.perf_counter_ns()
            r_low = self.search(queries, k)
            t1 = time.perf_counter_ns()
            self.set_search_params(**{kind.knob: high})
            r_high = self.search(queries, k)
            t2 = time.perf_counter_ns()
        finally:
            self.search_params = saved
        rec_low, rec_high = _recall(r_low.ids, exact, k), _recall(r_high.ids, exact, k)
        identical = bool(np.array_equal(r_low.ids, r_high.ids))
        ok = not (identical and rec_low >= 1.0)
        reason = (
            "recall or results move with the knob" if ok else
            f"exact results with identical ids at {kind.knob}={low} and {kind.knob}={high}: "
            f"a silent brute-force fallback (index_type {kind.index_type} on {self.where})"
        )
        check = BruteForceCheck(
            ok, kind.knob, low, high, rec_low, rec_high, identical, reason,
            extra={"ms_low": (t1 - t0) / 1e6, "ms_high": (t2 - t1) / 1e6, "nq": len(exact)},
        )
        log.info("milvus brute-force check: %s", check)
        if not ok and raise_on_failure:
            raise BackendError(f"{_WHERE}: {reason}")
        return check

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

    def _close_async_outside_loop(self) -> None:
        client, loop = self._aclient, self._aloop
        self._aclient, self._aloop = None, None
        if client is None or loop is None or loop.is_closed() or loop.is_running():
            return  # a closed loop took its channel with it; a running one: use aclose()
        with contextlib.suppress(Exception), quiet_pymilvus():
            loop.run_until_complete(client.close())

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
