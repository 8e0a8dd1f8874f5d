"""Redis vector search (the search module of Redis 8 / Redis Stack) through redis-py.

Where: ``url=`` given in code, else ``REDIS_URL`` (``make test`` starts one with
:mod:`retrieval.engines.redis.server`); the URL is reported without credentials
(:func:`retrieval.redact.redact_uri`) and never written to a manifest or an export.

Index: one ``FT.CREATE`` per build over HASH keys ``<name>:<row>``, vector field ``v``
(``FLOAT32``, ``DIM``, ``DISTANCE_METRIC`` L2 | IP | COSINE), algorithm ``HNSW`` (``M``,
``EF_CONSTRUCTION``, ``EF_RUNTIME`` default, ``EPSILON``) or ``FLAT``; rows are written in
pipelines and :meth:`RedisIndex.build` waits until ``FT.INFO`` reports every document indexed.
Search: ``FT.SEARCH ... KNN k @v $vec EF_RUNTIME $ef`` (DIALECT 2), one call per query; a batch
is one pipeline. ``EPSILON`` bounds range queries only: Redis refuses it in a KNN query ("range
query attributes were sent for a non-range query"), so it is a build attribute here (the index
default, exported) and not a KNN search knob.

Filtered search (:class:`~retrieval.indexes.base.SupportsFilter`, the ``engine`` strategy;
see :mod:`._redis_filter`): ``attach_attributes(attrs)`` before ``build`` adds one schema field
per attribute (``NUMERIC`` for integers, ``TAG`` with separator U+001F and ``CASESENSITIVE`` for
labels, a row's labels joined by it) and writes the values into each hash with its vector;
``filtered_search`` runs a hybrid query, e.g.
``(@a_topics:{earn|grain} @a_year:[1990 1995])=>[KNN $K @v $BLOB EF_RUNTIME $EF AS d]`` (TAG
values backslash-escaped; k, vector, ef as ``PARAMS``), -1 padded when fewer documents match.
Search knobs for hybrid queries only: ``HYBRID_POLICY`` ``AUTO`` (Redis chooses) | ``BATCHES``
(HNSW in batches of ``BATCH_SIZE``, each filtered) | ``ADHOC_BF`` (brute force over the
filter's matches; Redis refuses ``EF_RUNTIME`` with it, so it is not sent), so that the
strategy Redis uses is a measured axis. Unfiltered queries send neither (Redis refuses hybrid
attributes on a non-hybrid query). Integer attributes must lie within +-2**53 (NUMERIC is a
double).

Ownership: before ``FT.CREATE`` the build writes rwb's marker ``{rwb}owned:<index name>`` (run
id, host, pid, created; :mod:`.owned`) and its connections carry the name ``rwb-<run id>``;
:meth:`close` drops the index, its keys and the marker only while the marker names this
instance. What a killed run leaves is listed and removed by ``rwb services cleanup``.

Distances: Redis L2 is the squared Euclidean distance (as rwb), IP is ``1 - <x, q>`` (converted to
``-<x, q>``), COSINE ``1 - cos`` (as rwb). Memory: ``FT.INFO vector_index_sz_mb`` (the vector index
as Redis measures it, in bytes); the other FT.INFO figures go to ``BuildInfo.extra``.

Writes (:class:`~retrieval.indexes.base.SupportsWrites`, through
:class:`~retrieval.indexes.writes.SlotWrites`: keys are ``<name>:<slot>``, the caller's int64
ids are mapped in rwb): an insert is one ``HSET`` per new key (one pipeline per
``PIPELINE`` rows; Redis indexes a hash under the index's prefix as it is written), a delete
one ``DEL`` per key (the document leaves the index at once; RediSearch's garbage collector
reclaims the HNSW nodes later, on its own schedule); after each write rwb waits until
``FT.INFO num_docs`` equals the live count. Redis has no clean-up to call: ``maintain`` does
nothing and reports ``FT.INFO``'s document and index-size figures. A build with attributes
attached (filtered search) or an attached index takes no writes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from retrieval.data import Metric
from retrieval.engines.redis.filter import RedisFilter, hash_fields, schema_fields
from retrieval.engines.redis.owned import (
    client_name,
    marker_key,
    marker_run,
    new_run_id,
    set_marker,
)
from retrieval.errors import (
    BackendError,
    ConfigError,
    NotReachable,
    param_error,
    unknown_name_error,
)
from retrieval.indexes.base import MemoryClaim
from retrieval.indexes.brute_check import BruteForceCheck
from retrieval.indexes.inprocess import InProcessIndex, check_k
from retrieval.indexes.knob_check import knob_check
from retrieval.indexes.portable import Flat, Hnsw, Portable
from retrieval.indexes.registry import package_version, register
from retrieval.indexes.writes import SlotWrites
from retrieval.params import Params
from retrieval.redact import redact_uri

log = logging.getLogger(__name__)

WHERE = "backend 'redis'"
URL_ENV = "REDIS_URL"
METRIC = {"l2": "L2", "ip": "IP", "cosine": "COSINE"}
EF_RUNTIME_MAX = 4096
#: bytes a HASH document costs beyond its vector field, and an HNSW node beyond its links
#: (what the memory claim adds; MEMORY USAGE on Redis 8.2 gave ~190-225 per document)
DOC_OVERHEAD_B = 200.0
HNSW_NODE_B = 64.0
#: documents whose MEMORY USAGE is sampled (memory_facts)
MEMORY_SAMPLE = 256
#: rows per pipeline while loading; queries per pipeline in a batch
PIPELINE = 512


class RedisBuild(Params):
    """``FT.CREATE`` vector field attributes (Redis's names). HNSW: ``M`` links per node,
    ``EF_CONSTRUCTION`` candidates while building, ``EPSILON`` range-query boundary factor
    (range queries only); FLAT: exact scan, no knobs. ``TYPE``: the stored vector type,
    ``FLOAT32`` or ``FLOAT16`` (half the bytes; vectors and queries are sent as float16)."""

    algorithm: Literal["HNSW", "FLAT"] = "HNSW"
    TYPE: Literal["FLOAT32", "FLOAT16"] = "FLOAT32"
    M: int = Field(16, ge=2, le=1024)
    EF_CONSTRUCTION: int = Field(200, ge=1, le=16384)
    EPSILON: float = Field(0.01, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _flat_takes_no_graph_params(self) -> RedisBuild:
        """FLAT is an exact scan: HNSW's params given with it cannot apply (warned, ignored)."""
        given = sorted({"M", "EF_CONSTRUCTION", "EPSILON"} & self.model_fields_set)
        if self.algorithm == "FLAT" and given:
            log.warning("%s: %s ignored: algorithm FLAT is an exact scan with no graph (only "
                        "HNSW takes them)", WHERE, ", ".join(given))
        return self


class RedisSearch(Params):
    """``EF_RUNTIME``: candidates per KNN query (HNSW; >= k, checked at search).
    Filtered (hybrid) queries only: ``HYBRID_POLICY`` ``AUTO`` (none sent: Redis picks by its
    estimate), ``BATCHES`` (KNN in batches of ``BATCH_SIZE``, filtering each) or ``ADHOC_BF``
    (brute force over the filter's matches; EF_RUNTIME not sent); ``BATCH_SIZE`` (BATCHES
    only; None: Redis's default)."""

    EF_RUNTIME: int = Field(10, ge=1, le=EF_RUNTIME_MAX)
    HYBRID_POLICY: Literal["AUTO", "BATCHES", "ADHOC_BF"] = "AUTO"
    BATCH_SIZE: int | None = Field(None, ge=1, le=1_000_000)


def redis_url(url: str | None) -> str:
    target = url or os.environ.get(URL_ENV) or ""
    if not target:
        raise BackendError(
            f"{WHERE}: no Redis to connect to: set {URL_ENV} (start one with `python -m "
            f"retrieval.engines.redis.server start --dir .services/redis`)")
    return target


def connect(url: str, timeout_s: float, *, client_name: str | None = None) -> Any:
    """A redis-py client (RESP2 replies: flat lists, parsed in :meth:`RedisIndex._rows`) that
    answered PING and has the search module (``client_name``: the ``CLIENT SETNAME`` of its
    connections); BackendError (one line, the URL without credentials) otherwise."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    shown = redact_uri(url)
    try:
        client = redis.Redis.from_url(url, protocol=2, socket_connect_timeout=timeout_s,
                                      socket_timeout=max(timeout_s, 30.0),
                                      retry=Retry(NoBackoff(), 0), client_name=client_name)
    except ValueError:
        raise param_error(URL_ENV, "a redis://, rediss:// or unix:// URL", shown,
                          where=WHERE) from None
    try:
        client.ping()
        client.execute_command("FT._LIST")
    except redis.ResponseError as exc:
        raise BackendError(f"{WHERE}: Redis at {shown} has no vector search (FT._LIST: "
                           f"{str(exc)[:120]}); it needs Redis 8 or Redis Stack") from None
    except Exception as exc:  # refused, timed out, credentials refused: not reachable (exit 3)
        raise NotReachable(f"{WHERE}: cannot reach Redis at {shown} "
                           f"({type(exc).__name__}: {str(exc)[:160]})") from None
    return client


@register
class RedisIndex(SlotWrites, RedisFilter, InProcessIndex):
    """Redis vector search (see the module docstring)."""

    name = "redis"
    export_engine = "redis"
    family = "hnsw"  # FLAT builds: family_for(build)
    BuildParams = RedisBuild
    SearchParams = RedisSearch
    monotone_knobs: ClassVar[tuple[str, ...]] = ("EF_RUNTIME",)
    requires = ("redis",)
    deterministic = False

    def __init__(self, dim: int, metric: Metric, build: Params | None = None, *,
                 url: str | None = None, connect_timeout_s: float = 2.0,
                 index_timeout_s: float = 600.0, **kw: Any) -> None:
        super().__init__(dim, metric, build, **kw)
        self._url = redis_url(url)
        self.connect_timeout_s = float(connect_timeout_s)
        self.index_timeout_s = float(index_timeout_s)
        self.index_name = f"rwb_{uuid.uuid4().hex[:12]}"
        #: this instance's run id: its marker names it, its connections carry it (liveness)
        self._owner = new_run_id()
        self._client: Any = None
        self._info: dict[str, Any] = {}
        #: searching an index another process built (attach): never dropped here
        self._attached = False

    @property
    def where(self) -> str:
        return redact_uri(self._url)

    # --- class hooks -----------------------------------------------------------------------
    @classmethod
    def library_version(cls) -> str:
        return f"redis-py {package_version('redis')}"

    @classmethod
    def family_for(cls, build: Params | None) -> str:
        return "flat" if isinstance(build, RedisBuild) and build.algorithm == "FLAT" else "hnsw"

    @classmethod
    def monotone_knobs_for(cls, build: Params | None) -> tuple[str, ...]:
        return () if cls.family_for(build) == "flat" else cls.monotone_knobs

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable:
        half = build.get("TYPE", "FLOAT32") == "FLOAT16"
        if build.get("algorithm") == "FLAT":
            if half:
                raise ConfigError(f"{WHERE}: a FLAT FLOAT16 field has no neutral form to "
                                  f"export (exact search over half-precision vectors)")
            return Flat()
        return Hnsw(int(build["M"]), int(build["EF_CONSTRUCTION"]), int(search["EF_RUNTIME"]),
                    "FP16" if half else None,
                    native_engine="redis", native=(("EPSILON", build.get("EPSILON", 0.01)),))

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        assert isinstance(build, RedisBuild) and isinstance(search, RedisSearch)
        k = check_k(k, f"{WHERE} search params")
        if build.algorithm == "HNSW" and k > search.EF_RUNTIME:
            raise param_error("EF_RUNTIME", f">= k ({k}) and <= {EF_RUNTIME_MAX}",
                              search.EF_RUNTIME, where=f"{WHERE} search params")
        if search.BATCH_SIZE is not None and search.HYBRID_POLICY != "BATCHES":
            raise param_error("BATCH_SIZE", "unset unless HYBRID_POLICY is BATCHES",
                              f"{search.BATCH_SIZE} with HYBRID_POLICY {search.HYBRID_POLICY}",
                              where=f"{WHERE} search params")

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        return {"EF_RUNTIME": EF_RUNTIME_MAX}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """EF_RUNTIME in [k, 4096] (HNSW)."""
        if knob not in cls.monotone_knobs_for(build):
            raise unknown_name_error("knob", knob, cls.monotone_knobs_for(build), where=WHERE)
        k = check_k(k, f"{WHERE} knob_range")
        return min(k, EF_RUNTIME_MAX), EF_RUNTIME_MAX

    # --- build -----------------------------------------------------------------------------
    def _connect(self) -> Any:
        if self._client is None:
            self._client = connect(self._url, self.connect_timeout_s,
                                   client_name=client_name(self._owner))
        return self._client

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except (BackendError, ConfigError):
            raise
        except Exception as exc:
            import redis

            if isinstance(exc, redis.ConnectionError):  # the server went away mid-call: exit 3
                raise NotReachable(f"{WHERE}: {what} failed, Redis at {self.where} is not "
                                   f"reachable (connection lost): {type(exc).__name__}: "
                                   f"{str(exc)[:200]}") from None
            raise BackendError(f"{WHERE}: {what} failed on Redis at {self.where}: "
                               f"{type(exc).__name__}: {str(exc)[:200]}") from None

    def ft_create_args(self) -> list[Any]:
        """The ``FT.CREATE`` arguments of this build (after the index name)."""
        b = self.build_params
        assert isinstance(b, RedisBuild)
        attrs: list[Any] = ["TYPE", b.TYPE, "DIM", self.dim, "DISTANCE_METRIC",
                            METRIC[self.metric]]
        if b.algorithm == "HNSW":
            attrs += ["M", b.M, "EF_CONSTRUCTION", b.EF_CONSTRUCTION, "EPSILON", b.EPSILON]
        extra = schema_fields(self._attrs) if self._attrs is not None else []
        return ["ON", "HASH", "PREFIX", 1, f"{self.index_name}:", "SCHEMA", "v", "VECTOR",
                b.algorithm, len(attrs), *attrs, *extra]

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        attrs = self._build_attrs(x.shape[0])
        self._built_attrs = None
        client = self._connect()
        # rwb's marker first, so that a run killed from here on leaves a listed leftover
        if not self._call("SET", set_marker, client, self.index_name, self._owner,
                          f"vector index ({WHERE})"):
            raise BackendError(f"{WHERE}: Redis at {self.where} already holds an rwb marker "
                               f"for '{self.index_name}'; not built")
        try:
            self._call("FT.CREATE", client.execute_command, "FT.CREATE", self.index_name,
                       *self.ft_create_args())
        except BaseException:
            self._release()
            raise
        prefix = f"{self.index_name}:"
        t0 = time.perf_counter()
        try:
            for s in range(0, x.shape[0], PIPELINE):
                pipe = client.pipeline(transaction=False)
                chunk = x[s:s + PIPELINE]
                if self._half():
                    chunk = chunk.astype(np.float16)
                for i, row in enumerate(chunk):
                    if attrs is None:
                        pipe.hset(f"{prefix}{s + i}", "v", row.tobytes())
                    else:
                        pipe.hset(f"{prefix}{s + i}",
                                  mapping={"v": row.tobytes(), **hash_fields(attrs, s + i)})
                self._call("HSET", pipe.execute)
            info = self._wait_indexed(x.shape[0], t0)
        except BaseException:
            self._release()  # a failed build leaves no index or keys behind
            raise
        self._info, self._built_attrs = info, attrs
        return {"ft_info": {k: info.get(k) for k in (
            "num_docs", "vector_index_sz_mb", "total_index_memory_sz_mb", "total_indexing_time",
            "percent_indexed")}, "where": self.where, "index_name": self.index_name}

    def _ft_info(self) -> dict[str, Any]:
        raw = self._call("FT.INFO", self._client.ft(self.index_name).info)
        return {str(k): (v.decode() if isinstance(v, bytes) else v) for k, v in raw.items()}

    def _wait_indexed(self, n: int, t0: float) -> dict[str, Any]:
        while True:
            info = self._ft_info()
            if int(info.get("num_docs", 0)) >= n and str(info.get("indexing", "0")) == "0":
                failures = int(info.get("hash_indexing_failures", 0))
                if failures:
                    raise BackendError(f"{WHERE}: Redis failed to index {failures} of {n} "
                                       f"vectors on {self.where}")
                return info
            if time.perf_counter() - t0 > self.index_timeout_s:
                raise BackendError(f"{WHERE}: Redis indexed {info.get('num_docs')} of {n} "
                                   f"vectors within {self.index_timeout_s:g} s")
            time.sleep(0.02)

    # --- another process's index (SupportsServerAttach) -------------------------------------
    def server_handle(self) -> dict[str, Any]:
        """The built index (name and rows), for a process that searches it (:meth:`attach`)."""
        if not self._built:
            raise ConfigError(f"{WHERE}: server_handle() called before build()")
        return {"index_name": self.index_name, "n": self._n}

    def attach(self, handle: Mapping[str, Any]) -> None:
        """Search the index ``handle`` names (built by another process with the same params)
        instead of building one; it must report every row indexed; :meth:`close` leaves it to
        its owner."""
        import re

        name, n = str(handle.get("index_name", "")), int(handle.get("n", 0))
        if not re.fullmatch(r"rwb_[0-9a-f]{12}", name):
            raise ConfigError(f"{WHERE}: attach handle field 'index_name' must be an rwb index "
                              f"name (rwb_ and 12 hex digits); received {name!r}")
        self._check_open()
        self._connect()
        self.index_name, self._attached = name, True
        info = self._ft_info()
        if int(info.get("num_docs", 0)) < n:
            raise BackendError(f"{WHERE}: index {name} on {self.where} holds "
                               f"{info.get('num_docs')} of {n} vectors")
        self._info, self._ids, self._n, self._built = info, None, n, True
        self._checked_k = -1

    # --- search ----------------------------------------------------------------------------
    def _command(self, k: int) -> Callable[[np.ndarray], list[Any]]:
        sp = self.search_params
        assert isinstance(sp, RedisSearch)
        b = self.build_params
        assert isinstance(b, RedisBuild)
        ef = f" EF_RUNTIME {sp.EF_RUNTIME}" if b.algorithm == "HNSW" else ""
        query = f"*=>[KNN {k} @v $vec{ef} AS d]"
        head = ["FT.SEARCH", self.index_name, query, "PARAMS", 2, "vec"]
        tail = ["SORTBY", "d", "LIMIT", 0, k, "RETURN", 1, "d", "DIALECT", 2]
        if self._half():
            return lambda row: [*head, row.astype(np.float16).tobytes(), *tail]
        return lambda row: [*head, row.tobytes(), *tail]

    def _rows(self, replies: list[Any], k: int) -> tuple[np.ndarray, np.ndarray]:
        nq = len(replies)
        ids = np.full((nq, k), -1, dtype=np.int64)
        d = np.full((nq, k), np.inf, dtype=np.float32)
        cut = len(self.index_name) + 1
        for r, reply in enumerate(replies):
            docs = reply[1:]
            for j in range(min(k, len(docs) // 2)):
                ids[r, j] = int(docs[2 * j][cut:])
                d[r, j] = float(docs[2 * j + 1][1])
        if self.metric == "ip":
            d = np.where(ids >= 0, d - np.float32(1.0), np.inf).astype(np.float32)
        return d, ids

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self._run(self._command(k), x, k)

    def _run(self, make: Callable[[np.ndarray], list[Any]], x: np.ndarray,
             k: int) -> tuple[np.ndarray, np.ndarray]:
        """``make(row)`` for each row of ``x``: one call, or one pipeline per PIPELINE rows."""
        client = self._client
        if x.shape[0] == 1:
            return self._rows([self._call("FT.SEARCH", client.execute_command, *make(x[0]))], k)
        replies: list[Any] = []
        for s in range(0, x.shape[0], PIPELINE):
            pipe = client.pipeline(transaction=False)
            for row in x[s:s + PIPELINE]:
                pipe.execute_command(*make(row))
            replies.extend(self._call("FT.SEARCH", pipe.execute))
        return self._rows(replies, k)

    def _hybrid(self, k: int, prefix: str) -> Callable[[np.ndarray], list[Any]]:
        """One filtered KNN command per query row: ``prefix`` (a query filter), the knobs as
        ``PARAMS`` (see :class:`RedisSearch` for HYBRID_POLICY / BATCH_SIZE)."""
        sp = self.search_params
        assert isinstance(sp, RedisSearch)
        b = self.build_params
        assert isinstance(b, RedisBuild)
        knobs, params = "", ["K", k]
        if b.algorithm == "HNSW" and sp.HYBRID_POLICY != "ADHOC_BF":
            knobs, params = " EF_RUNTIME $EF", [*params, "EF", sp.EF_RUNTIME]
        if sp.HYBRID_POLICY != "AUTO":
            knobs += f" HYBRID_POLICY {sp.HYBRID_POLICY}"
        if sp.BATCH_SIZE is not None:
            knobs, params = f"{knobs} BATCH_SIZE $BS", [*params, "BS", sp.BATCH_SIZE]
        query = f"{prefix}=>[KNN $K @v $BLOB{knobs} AS d]"
        head = ["FT.SEARCH", self.index_name, query, "PARAMS", len(params) + 2, *params, "BLOB"]
        tail = ["SORTBY", "d", "LIMIT", 0, k, "RETURN", 1, "d", "DIALECT", 2]
        if self._half():
            return lambda row: [*head, row.astype(np.float16).tobytes(), *tail]
        return lambda row: [*head, row.tobytes(), *tail]

    def _knn(self, x: np.ndarray, k: int, prefix: str) -> tuple[np.ndarray, np.ndarray]:
        """Top-k of each row of ``x`` among the documents matching ``prefix``."""
        return self._run(self._hybrid(k, prefix), x, k)

    def _hot(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
        make, execute = self._command(k), self._client.execute_command

        def call(x: np.ndarray) -> Any:
            return execute(*make(x[0]))

        return call, (lambda raw: self._rows([raw], k))

    # --- checks, memory, close ---------------------------------------------------------------
    def verify_not_brute_force(self, queries: np.ndarray, k: int, exact_ids: np.ndarray, *,
                               raise_on_failure: bool = True) -> BruteForceCheck | None:
        """HNSW: recall at EF_RUNTIME = k vs the most accurate (see :mod:`._knob_check`)."""
        if not self.monotone_knobs_for(self.build_params):
            return None
        return knob_check(self, "EF_RUNTIME", queries, k, exact_ids,
                          raise_on_failure=raise_on_failure, why="FT.SEARCH KNN on HNSW")

    def _half(self) -> bool:
        b = self.build_params
        return isinstance(b, RedisBuild) and b.TYPE == "FLOAT16"

    def memory_claim(self) -> MemoryClaim:
        """The vector in the index (2 or 4 bytes a dimension) + layer-0 links (2*M ids of 4
        bytes) and node metadata (HNSW) + the same vector again as the HASH field Redis indexes
        from, with the key's own overhead (measured here: ~200 bytes a document)."""
        b = self.build_params
        assert isinstance(b, RedisBuild)
        vec = (2.0 if b.TYPE == "FLOAT16" else 4.0) * self.dim
        graph = 8.0 * b.M + HNSW_NODE_B if b.algorithm == "HNSW" else 0.0
        return MemoryClaim(2 * vec + graph + DOC_OVERHEAD_B, b.TYPE)

    def memory_facts(self) -> dict[str, Any]:
        """Redis's own figures: ``FT.INFO vector_index_sz_mb`` (the vector index) plus the
        documents' ``MEMORY USAGE`` (the HASH keys holding the vectors; sampled on up to
        ``MEMORY_SAMPLE`` keys and scaled to the row count). Bytes."""
        if not self._built:
            raise ConfigError(f"{WHERE}: memory_facts() called before build()")
        index = self.memory_bytes()
        step = max(1, self._n // MEMORY_SAMPLE)
        rows = range(0, self._n, step)
        pipe = self._client.pipeline(transaction=False)
        for r in rows:
            pipe.memory_usage(f"{self.index_name}:{r}")
        used = [int(u or 0) for u in self._call("MEMORY USAGE", pipe.execute)]
        docs = int(sum(used) / max(1, len(used)) * self._n)
        return {"resident_bytes": index + docs, "disk_bytes": None,
                "source": "FT.INFO vector_index_sz_mb + MEMORY USAGE of the documents "
                          f"(sampled on {len(used)} keys)",
                "vector_index_bytes": index, "documents_bytes": docs}

    def memory_bytes(self) -> int:
        """``FT.INFO vector_index_sz_mb`` in bytes (Redis's own figure for the vector index)."""
        if not self._built:
            return 0
        info = self._ft_info()
        return max(1, int(float(info.get("vector_index_sz_mb", 0.0)) * 2**20))

    # --- writes (SlotWrites hooks) -------------------------------------------------------------
    def cannot_write(self) -> str | None:
        if self._attached:
            return "it searches an index another process built (attach)"
        if getattr(self, "_built_attrs", None) is not None:
            return "its build carries attributes for filtered search (inserts would have none)"
        return None

    def _built_count(self) -> int:
        return self._n

    def _check_writable(self) -> None:
        self._check_open()
        if not self._built or self._client is None:
            raise ConfigError(f"{WHERE}: insert/delete called before build()")

    def _after_writes(self, live: int) -> None:
        self._n = live
        self._checked_k = -1
        t0 = time.perf_counter()
        while True:
            info = self._ft_info()
            if int(info.get("num_docs", -1)) == live and str(info.get("indexing", "0")) == "0":
                self._info = info
                return
            if time.perf_counter() - t0 > self.index_timeout_s:
                raise BackendError(f"{WHERE}: Redis reports {info.get('num_docs')} documents "
                                   f"for {live} live vectors after {self.index_timeout_s:g} s")
            time.sleep(0.005)

    def _insert_rows(self, x: np.ndarray, slots: np.ndarray) -> None:
        prefix = f"{self.index_name}:"
        for s in range(0, x.shape[0], PIPELINE):
            pipe = self._client.pipeline(transaction=False)
            for slot, row in zip(slots[s:s + PIPELINE].tolist(), x[s:s + PIPELINE],
                                 strict=True):
                pipe.hset(f"{prefix}{slot}", "v", row.tobytes())
            self._call("HSET", pipe.execute)

    def _delete_rows(self, slots: np.ndarray) -> None:
        prefix = f"{self.index_name}:"
        removed = 0
        for s in range(0, slots.shape[0], PIPELINE):
            keys = [f"{prefix}{slot}" for slot in slots[s:s + PIPELINE].tolist()]
            removed += int(self._call("DEL", self._client.delete, *keys))
        if removed != slots.shape[0]:
            raise BackendError(f"{WHERE}: DEL removed {removed} of {slots.shape[0]} keys on "
                               f"{self.where}")

    def _maintain(self) -> tuple[str, dict[str, Any]]:
        """Redis has no clean-up call (its GC runs on its own): FT.INFO figures only."""
        info = self._ft_info()
        return "none", {k: info.get(k) for k in (
            "num_docs", "vector_index_sz_mb", "total_index_memory_sz_mb")}

    def _release(self) -> None:
        client = self._client
        if self._attached:  # another process's index
            self._attached = False
        elif client is not None:
            with contextlib.suppress(Exception):
                if marker_run(client, self.index_name) == self._owner:  # only what it created
                    with contextlib.suppress(Exception):
                        client.execute_command("FT.DROPINDEX", self.index_name, "DD")
                    client.delete(marker_key(self.index_name))
        self.index_name = f"rwb_{uuid.uuid4().hex[:12]}"

    def close(self) -> None:
        super().close()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


__all__ = ["RedisBuild", "RedisIndex", "RedisSearch", "connect"]
