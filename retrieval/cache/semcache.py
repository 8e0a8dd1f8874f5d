"""Semantic cache on a real Redis (8.x or Redis Stack with the search module), through redisvl.

The cache is redisvl's ``SemanticCache`` (0.28): one Redis hash per entry (prompt, response,
float32 prompt vector) under a search index with a COSINE vector field, and lookups as a
``VECTOR_RANGE`` query returning the nearest entry whose cosine distance is <= the threshold.
rwb adds four things around it:

- **typed thresholds** (:class:`Threshold`): a value with its unit, ``cosine_distance`` (0..2,
  lower is stricter; what Redis compares) or ``cosine_similarity`` (-1..1, higher is stricter),
  and exact conversions to the parameter each library takes (:data:`CONVENTIONS`);
- **vectors from an rwb Embedder** (or precomputed vectors), never redisvl's default model
  (which would be downloaded from the hub);
- an **HNSW** vector index when asked (redisvl's cache schema is FLAT, brute force); the index is
  created here from redisvl's own cache schema with only the algorithm changed, and redisvl is
  told to use it (``create_index=False``, its documented hook for externally managed indexes);
- **fault handling**: an unreachable Redis at start raises :class:`BackendError` naming the URL
  (password hidden) within ``connect_timeout_s``; when Redis goes away mid-run, lookups are
  bypassed to a miss and counted (``bypassed``), stores are retried ``store_retries`` times and
  then counted as lost; nothing raises. After a failure Redis is not tried again for
  ``outage_cooldown_s`` seconds (those lookups are bypassed too), then it is retried.

Why redisvl and not raw redis-py search commands: redisvl's ``SemanticCache`` is what users
deploy (LangChain's ``langchain_redis.RedisSemanticCache`` wraps it too), so tuning through it
measures the real lookup path, and its schema/threshold semantics are the ones exported. Raw
pipelined ``FT.SEARCH`` is used only for the bulk KNN distance fetch of threshold tuning
(:meth:`SemanticCache.nearest`), where one round trip per query would dominate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from retrieval.cache.thresholds import (
    CONVENTIONS,
    Convention,
    Threshold,
    ThresholdSpec,
    ThresholdUnit,
    convention,
)
from retrieval.errors import BackendError, ConfigError, param_error
from retrieval.params import Params

if TYPE_CHECKING:
    from retrieval.embed import Embedder

log = logging.getLogger(__name__)

VECTOR_FIELD = "prompt_vector"  # redisvl's CACHE_VECTOR_FIELD_NAME


# --------------------------------------------------------------------------- URL helpers


def redact_url(url: str) -> str:
    """The URL with credentials replaced by ``***`` (rwb's one policy,
    :func:`retrieval.redact.redact_uri`), safe for messages and manifests."""
    from retrieval.redact import redact_uri

    return redact_uri(url)


def _is_outage(exc: BaseException) -> bool:
    """True when ``exc`` (or its cause chain) is a lost/refused connection or a timeout."""
    import redis

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, redis.ConnectionError | redis.TimeoutError | ConnectionError
                      | TimeoutError):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _index_missing(exc: BaseException) -> bool:
    """True when Redis answered that the index does not exist (e.g. after a restart)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        text = str(cur).lower()
        if "no such index" in text or "unknown index name" in text:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def connect_redis(url: str, *, connect_timeout_s: float = 2.0,
                  socket_timeout_s: float = 5.0) -> Any:
    """A redis-py client for ``url`` that has answered PING and has the search module.

    Fails within about ``connect_timeout_s`` with a BackendError naming the URL (password
    hidden); a malformed URL is a ConfigError. The client does not retry on its own (redis-py 8
    would spend ~4 s on backoff): callers decide.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    shown = redact_url(url)
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=connect_timeout_s, socket_timeout=socket_timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
    except ValueError as exc:
        raise param_error(
            "redis_url", "a redis://, rediss:// or unix:// URL", shown, where="semantic cache",
        ) from exc
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        raise BackendError(f"Redis at {shown}: authentication failed ({exc})") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise BackendError(
            f"cannot reach Redis at {shown} ({exc}); start one with `python -m "
            f"retrieval.services.redis_server start --dir .services/redis` or set REDIS_URL"
        ) from None
    try:
        client.execute_command("FT._LIST")
    except redis.ResponseError as exc:
        raise BackendError(
            f"Redis at {shown} has no search module (FT._LIST: {exc}); "
            f"the semantic cache needs Redis 8 or Redis Stack"
        ) from None
    return client


# --------------------------------------------------------------------------- the cache


class IndexParams(Params):
    """How the cache's vector index is built (redisvl's own cache schema is ``flat``)."""

    algorithm: Literal["flat", "hnsw"] = "hnsw"
    m: int = Field(16, ge=2, le=512, description="HNSW graph degree")
    ef_construction: int = Field(200, ge=1, le=4096)
    ef_runtime: int = Field(64, ge=1, le=4096, description="HNSW search breadth at query time")
    epsilon: float = Field(
        0.01, gt=0.0, le=10.0,
        description="HNSW range-query boundary factor (Redis EPSILON; lookups are range "
                    "queries, and a small value can miss close entries that KNN finds)",
    )
    ttl_s: int | None = Field(None, ge=1, description="entry time-to-live in seconds")
    lookup: Literal["range", "knn"] = Field(
        "range",
        description="range: redisvl SemanticCache.check (VECTOR_RANGE, what redisvl users "
                    "run); knn: KNN 1 through redisvl's VectorQuery, threshold applied here "
                    "(the semantics threshold tuning measures)",
    )


@dataclass(frozen=True)
class Lookup:
    """One lookup. ``distance`` is the cosine distance (0..2) of the entry that hit."""

    hit: bool
    response: str | None = None
    prompt: str | None = None
    distance: float | None = None
    key: str | None = None
    bypassed: bool = False


@dataclass(frozen=True)
class CacheStats:
    """Counters since the cache was opened. ``bypassed`` lookups count as misses too."""

    lookups: int = 0
    hits: int = 0
    misses: int = 0
    bypassed: int = 0
    stores: int = 0
    store_retries: int = 0
    stores_lost: int = 0
    index_recreated: int = 0


def _vectorizer(embedder: Embedder | None, dim: int, model_id: str) -> Any:
    """A redisvl vectorizer that delegates to an rwb Embedder (lazily; never downloads)."""
    from pydantic import PrivateAttr
    from redisvl.utils.vectorize.base import BaseVectorizer

    class EmbedderVectorizer(BaseVectorizer):
        _embedder: Any = PrivateAttr(default=None)

        @property
        def type(self) -> str:
            return "rwb"

        def _embed(self, content: Any, **kwargs: Any) -> list[float]:
            if self._embedder is None:
                raise ConfigError("semantic cache: no embedder; pass vector= to lookup/store")
            return [float(x) for x in self._embedder.embed([str(content)])[0]]

        def _embed_many(
            self, contents: list[Any], batch_size: int = 10, **kwargs: Any
        ) -> list[list[float]]:
            if self._embedder is None:
                raise ConfigError("semantic cache: no embedder; pass vectors to store_many")
            arr = self._embedder.embed([str(c) for c in contents], batch_size=max(batch_size, 1))
            return arr.astype(float).tolist()

    vec = EmbedderVectorizer(model=model_id, dims=dim, dtype="float32")
    vec._embedder = embedder
    return vec


class SemanticCache:
    """A semantic LLM-response cache in Redis (redisvl ``SemanticCache`` underneath).

    ``threshold``: a hit needs cosine distance <= ``threshold.cosine_distance``. ``embedder``
    turns prompts into vectors (it may be None when every call passes ``vector=``; then ``dim``
    is required). ``overwrite`` drops an existing index of the same name (and its entries).
    Timeouts are in seconds.
    """

    def __init__(
        self,
        redis_url: str,
        threshold: Threshold,
        *,
        embedder: Embedder | None = None,
        dim: int | None = None,
        name: str = "rwb-semcache",
        index: IndexParams | None = None,
        overwrite: bool = False,
        connect_timeout_s: float = 2.0,
        socket_timeout_s: float = 5.0,
        store_retries: int = 2,
        retry_backoff_s: float = 0.05,
        outage_cooldown_s: float = 0.5,
    ) -> None:
        if not isinstance(threshold, Threshold):
            raise param_error("threshold", "a Threshold (value + unit)", threshold,
                              where="semantic cache")
        if not name or any(c in name for c in " :{}*"):
            raise param_error("name", "a non-empty name without spaces, ':', '{', '}', '*'",
                              name, where="semantic cache")
        if store_retries < 0:
            raise param_error("store_retries", "an integer >= 0", store_retries,
                              where="semantic cache")
        self.url = redact_url(redis_url)
        self.name = name
        self.params = index or IndexParams()
        self._threshold = threshold
        self._embedder = embedder
        self.store_retries = int(store_retries)
        self.retry_backoff_s = float(retry_backoff_s)
        self.outage_cooldown_s = float(outage_cooldown_s)
        self._down_until = 0.0
        self._counts = dict.fromkeys(CacheStats.__dataclass_fields__, 0)
        if dim is None:
            if embedder is None:
                raise param_error("dim", "given when no embedder is passed", None,
                                  where="semantic cache")
            dim = int(embedder.dim)
        self.dim = int(dim)
        self.model_id = embedder.model_id if embedder is not None else "precomputed"
        self._client = connect_redis(redis_url, connect_timeout_s=connect_timeout_s,
                                     socket_timeout_s=socket_timeout_s)
        self._cache = self._open(overwrite)

    # -- set-up ---------------------------------------------------------------------------


    def _schema(self) -> Any:
        from redisvl.extensions.cache.llm.schema import SemanticCacheIndexSchema

        schema = SemanticCacheIndexSchema.from_params(self.name, self.name, self.dim, "float32")
        if self.params.algorithm == "hnsw":
            spec = schema.to_dict()
            for f in spec["fields"]:
                if f["name"] == VECTOR_FIELD:
                    f["attrs"].update(
                        algorithm="hnsw", m=self.params.m,
                        ef_construction=self.params.ef_construction,
                        ef_runtime=self.params.ef_runtime,
                        epsilon=self.params.epsilon,
                    )
            schema = SemanticCacheIndexSchema.from_dict(spec)
        return schema

    def _open(self, overwrite: bool) -> Any:
        from redisvl.extensions.cache.llm import SemanticCache as RvlSemanticCache
        from redisvl.index import SearchIndex

        index = SearchIndex(schema=self._schema(), redis_client=self._client)
        try:
            exists = index.exists()
            if exists and not overwrite:
                live = SearchIndex.from_existing(self.name, redis_client=self._client)
                if not _same_vector_field(live.schema.to_dict(), index.schema.to_dict()):
                    raise ConfigError(
                        f"semantic cache: index '{self.name}' at {self.url} exists with another "
                        f"vector schema ({_vector_attrs(live.schema.to_dict())}); pass "
                        f"overwrite=True or use another name"
                    )
            if overwrite or not exists:
                index.create(overwrite=True, drop=True)
            cache = RvlSemanticCache(
                name=self.name,
                distance_threshold=self._threshold.cosine_distance,
                ttl=self.params.ttl_s,
                vectorizer=_vectorizer(self._embedder, self.dim, self.model_id),
                redis_client=self._client,
                create_index=False,
            )
        except ConfigError:
            raise
        except Exception as exc:
            if _is_outage(exc):
                raise BackendError(f"Redis at {self.url} went away during set-up: {exc}") from None
            raise BackendError(f"semantic cache '{self.name}' at {self.url}: {exc}") from exc
        self._index = index
        log.info("semantic cache '%s' at %s (%s, dim %d, threshold %s)", self.name, self.url,
                 self.params.algorithm, self.dim, self._threshold)
        return cache

    # -- properties -----------------------------------------------------------------------

    @property
    def threshold(self) -> Threshold:
        return self._threshold

    def set_threshold(self, threshold: Threshold) -> None:
        if not isinstance(threshold, Threshold):
            raise param_error("threshold", "a Threshold (value + unit)", threshold,
                              where="semantic cache")
        self._threshold = threshold
        self._cache.set_threshold(threshold.cosine_distance)

    def stats(self) -> CacheStats:
        return CacheStats(**self._counts)

    def size(self) -> int:
        """Number of entries in the index (BackendError if Redis is unreachable)."""
        try:
            return int(self._index.info()["num_docs"])
        except Exception as exc:
            raise BackendError(f"Redis at {self.url}: cannot read index size ({exc})") from None

    # -- vectors --------------------------------------------------------------------------

    def _vector(self, prompt: str, vector: Any) -> np.ndarray:
        if vector is None:
            if self._embedder is None:
                raise ConfigError("semantic cache: no embedder; pass vector=")
            return np.asarray(self._embedder.embed([prompt])[0], dtype=np.float32)
        arr = np.asarray(vector, dtype=np.float32).reshape(-1)
        if arr.shape[0] != self.dim:
            raise param_error("vector", f"of length {self.dim}", f"length {arr.shape[0]}",
                              where="semantic cache")
        return arr

    # -- lookups --------------------------------------------------------------------------

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _mark_down(self, what: str, exc: BaseException) -> None:
        first = self._down_until == 0.0 or self._counts["bypassed"] == 0
        self._down_until = time.monotonic() + self.outage_cooldown_s
        (log.warning if first else log.debug)(
            "Redis at %s unavailable during %s (%s); bypassing for %.2f s",
            self.url, what, exc, self.outage_cooldown_s,
        )

    def lookup(
        self, prompt: str, *, vector: Any = None, threshold: Threshold | None = None
    ) -> Lookup:
        """The nearest cached entry within the threshold, or a miss (never raises on outage)."""
        vec = self._vector(prompt, vector)
        self._counts["lookups"] += 1
        thr = (threshold or self._threshold).cosine_distance
        if not self._available():
            return self._bypass()
        try:
            if self.params.lookup == "knn":
                hits = self._knn_check(vec, thr)
            else:
                hits = self._cache.check(vector=vec.tolist(), num_results=1,
                                         distance_threshold=thr)
        except Exception as exc:
            if _is_outage(exc):
                self._mark_down("lookup", exc)
                return self._bypass()
            if _index_missing(exc):
                self._recreate_index()
                self._counts["misses"] += 1
                return Lookup(hit=False)
            raise BackendError(f"semantic cache '{self.name}' at {self.url}: lookup failed: "
                               f"{exc}") from exc
        if not hits:
            self._counts["misses"] += 1
            return Lookup(hit=False)
        h = hits[0]
        self._counts["hits"] += 1
        return Lookup(hit=True, response=h.get("response"), prompt=h.get("prompt"),
                      distance=float(h["vector_distance"]), key=h.get("key"))

    def _knn_check(self, vec: np.ndarray, thr: float) -> list[dict[str, Any]]:
        """KNN 1 through redisvl's VectorQuery; a hit when its distance <= ``thr``."""
        from redisvl.query import VectorQuery

        query = VectorQuery(vector=vec.tolist(), vector_field_name=VECTOR_FIELD,
                            return_fields=["entry_id", "prompt", "response"], num_results=1,
                            return_score=True, dtype="float32")
        out = []
        for r in self._index.query(query):
            if float(r["vector_distance"]) <= thr:
                out.append({**r, "key": r["id"]})
                if self.params.ttl_s:
                    self._cache.expire(r["id"])
        return out

    def _recreate_index(self) -> None:
        """The server lost the index (restarted empty): create it again; entries written
        meanwhile under the prefix are indexed by Redis in the background."""
        log.warning("semantic cache index '%s' vanished from %s; re-creating it", self.name,
                    self.url)
        try:
            self._index.create(overwrite=False)
        except Exception as exc:
            if _is_outage(exc):
                self._mark_down("index re-creation", exc)
                return
            raise BackendError(f"semantic cache '{self.name}' at {self.url}: cannot re-create "
                               f"index: {exc}") from exc
        self._counts["index_recreated"] += 1

    def _bypass(self) -> Lookup:
        self._counts["bypassed"] += 1
        self._counts["misses"] += 1
        return Lookup(hit=False, bypassed=True)

    # -- stores ---------------------------------------------------------------------------

    def _retrying(self, what: str, n: int, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` with retries on outage; None (and ``n`` counted lost) if all fail.

        While Redis is known to be down (the cool-down after a failure) nothing is tried: the
        entries are counted lost at once, so a long outage does not stall the caller.
        """
        if not self._available():
            self._counts["stores_lost"] += n
            return None
        for attempt in range(self.store_retries + 1):
            if attempt:
                self._counts["store_retries"] += 1
                time.sleep(self.retry_backoff_s * (2 ** (attempt - 1)))
            try:
                result = fn()
            except Exception as exc:
                if not _is_outage(exc):
                    raise BackendError(f"semantic cache '{self.name}' at {self.url}: {what} "
                                       f"failed: {exc}") from exc
                self._mark_down(what, exc)
                continue
            self._down_until = 0.0
            return result
        self._counts["stores_lost"] += n
        log.warning("Redis at %s: %s lost after %d attempts (%d entries)", self.url, what,
                    self.store_retries + 1, n)
        return None

    def store(
        self, prompt: str, response: str, *, vector: Any = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """Store one entry (retried on outage); False when it was lost."""
        vec = self._vector(prompt, vector).tolist()
        key = self._retrying(
            "store", 1,
            lambda: self._cache.store(prompt=prompt, response=response, vector=vec,
                                      metadata=metadata),
        )
        if key is None:
            return False
        self._counts["stores"] += 1
        return True

    def store_many(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        vectors: np.ndarray,
        *,
        ids: Sequence[str] | None = None,
        batch_size: int = 1000,
    ) -> int:
        """Bulk load (pipelined HSETs of redisvl's cache-entry fields); returns entries stored.

        Each batch is retried on outage and counted lost if it still fails. ``ids`` become the
        entry ids (keys ``<name>:<id>``); default: redisvl's hash of the prompt.
        """
        from redisvl.redis.utils import hashify

        n = len(prompts)
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(responses) != n or vecs.shape != (n, self.dim) or (ids is not None
                                                                  and len(ids) != n):
            raise param_error(
                "store_many", f"prompts, responses, ids and an (n, {self.dim}) vector matrix of "
                f"one length n", f"{n} prompts, {len(responses)} responses, vectors "
                f"{vecs.shape}" + (f", {len(ids)} ids" if ids is not None else ""),
                where="semantic cache",
            )
        ttl = self.params.ttl_s
        stored = 0
        now = time.time()
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)

            def write(start: int = start, stop: int = stop) -> int:
                pipe = self._client.pipeline(transaction=False)
                for i in range(start, stop):
                    entry_id = ids[i] if ids is not None else hashify(prompts[i])
                    key = self._index.key(entry_id)
                    pipe.hset(key, mapping={
                        "entry_id": entry_id, "prompt": prompts[i], "response": responses[i],
                        VECTOR_FIELD: vecs[i].tobytes(), "inserted_at": now, "updated_at": now,
                    })
                    if ttl:
                        pipe.expire(key, ttl)
                pipe.execute()
                return stop - start

            done = self._retrying("store_many batch", stop - start, write)
            stored += done or 0
        self._counts["stores"] += stored
        return stored

    # -- bulk KNN (threshold tuning) ------------------------------------------------------

    def nearest(
        self, vectors: np.ndarray, k: int = 1, *, batch_size: int = 256,
        ef_runtime: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """KNN ``k`` for each row via pipelined ``FT.SEARCH``: (keys (n, k) object array with
        None for "no result", cosine distances (n, k) float64 with +inf for "no result").

        Unlike :meth:`lookup` this raises BackendError on an outage (a tuning run needs every
        distance).
        """
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise param_error("vectors", f"an (n, {self.dim}) matrix", vecs.shape,
                              where="semantic cache nearest")
        if k < 1:
            raise param_error("k", "an integer >= 1", k, where="semantic cache nearest")
        ef = ef_runtime or self.params.ef_runtime
        knn = f"*=>[KNN {k} @{VECTOR_FIELD} $vec" + (
            f" EF_RUNTIME {max(ef, k)}" if self.params.algorithm == "hnsw" else ""
        ) + " AS __d]"
        n = vecs.shape[0]
        keys = np.full((n, k), None, dtype=object)
        dists = np.full((n, k), np.inf, dtype=np.float64)
        try:
            for start in range(0, n, batch_size):
                stop = min(start + batch_size, n)
                pipe = self._client.pipeline(transaction=False)
                for i in range(start, stop):
                    pipe.execute_command(
                        "FT.SEARCH", self.name, knn, "PARAMS", 2, "vec", vecs[i].tobytes(),
                        "SORTBY", "__d", "ASC", "RETURN", 1, "__d", "LIMIT", 0, k,
                        "DIALECT", 2,
                    )
                for row, reply in enumerate(pipe.execute(), start=start):
                    _parse_knn(reply, keys[row], dists[row])
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"semantic cache '{self.name}' at {self.url}: KNN failed: "
                               f"{exc}") from None
        return keys, dists

    # -- housekeeping ---------------------------------------------------------------------

    def clear(self) -> None:
        """Delete every entry, keep the index."""
        self._cache.clear()

    def drop(self) -> None:
        """Drop the index and its entries."""
        try:
            self._index.delete(drop=True)
        except Exception as exc:
            raise BackendError(f"semantic cache '{self.name}' at {self.url}: drop failed: "
                               f"{exc}") from None

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # closing a dead connection must not raise
            log.debug("closing redis client failed", exc_info=True)

    def __enter__(self) -> SemanticCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"SemanticCache(name={self.name!r}, url={self.url!r}, threshold="
                f"{self._threshold}, index={self.params.algorithm})")


def _parse_knn(reply: Any, keys_row: np.ndarray, dists_row: np.ndarray) -> None:
    """Parse an FT.SEARCH reply into one row: RESP3 (a map with ``results``, redis-py 8's
    default) or RESP2 (``[total, key, [field, value, ...], ...]``)."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(reply, dict):
        results: list[Any] = reply.get(b"results") or reply.get("results") or []
        for item in results:
            attrs = item.get(b"extra_attributes", item.get("extra_attributes", {}))
            pairs.append((item.get(b"id", item.get("id")), attrs.get(b"__d", attrs.get("__d"))))
    else:
        for pos in range(1, len(reply) - 1, 2):
            fields = reply[pos + 1]
            value = None
            for f in range(0, len(fields) - 1, 2):
                if fields[f] in (b"__d", "__d"):
                    value = fields[f + 1]
            pairs.append((reply[pos], value))
    j = 0
    for key, value in pairs:
        if j >= len(keys_row) or value is None or key is None:
            continue
        keys_row[j] = key.decode() if isinstance(key, bytes) else str(key)
        dists_row[j] = float(value)
        j += 1


def _vector_attrs(schema: dict[str, Any]) -> dict[str, Any]:
    for f in schema.get("fields", []):
        if f.get("name") == VECTOR_FIELD:
            attrs = dict(f.get("attrs", {}))
            return {k: attrs.get(k) for k in ("algorithm", "dims", "distance_metric", "datatype")}
    return {}


def _same_vector_field(live: dict[str, Any], wanted: dict[str, Any]) -> bool:
    a, b = _vector_attrs(live), _vector_attrs(wanted)
    return {k: str(v).lower() for k, v in a.items()} == {k: str(v).lower() for k, v in b.items()}


__all__ = [
    "CONVENTIONS",
    "CacheStats",
    "Convention",
    "IndexParams",
    "Lookup",
    "SemanticCache",
    "Threshold",
    "ThresholdSpec",
    "ThresholdUnit",
    "connect_redis",
    "convention",
    "redact_url",
]
