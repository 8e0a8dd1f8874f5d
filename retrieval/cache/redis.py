"""The Redis side of the semantic cache: connection, the redisvl index, bulk fill, bulk KNN.

Everything here talks to Redis (8.x or Redis Stack with the search module) through redis-py and
redisvl 0.28, and holds no cache state: :class:`retrieval.cache.live.SemanticCache` keeps the
counters, the threshold and the outage policy and calls these.

- :func:`connect_redis`: a client that answered PING and has the search module, or a
  :class:`BackendError` naming the URL (password hidden) within ``connect_timeout_s``;
- :class:`IndexParams`, :func:`cache_schema`, :func:`open_cache`: redisvl's own cache schema
  with only the vector algorithm changed when HNSW is asked (redisvl's is FLAT, brute force);
  the index is created here and redisvl is told to use it (``create_index=False``, its
  documented hook for externally managed indexes);
- :func:`embedder_vectorizer`: a redisvl vectorizer that delegates to an rwb Embedder (never
  redisvl's default model, which would be downloaded from the hub);
- :func:`write_entries`: pipelined HSETs of redisvl's cache-entry fields (bulk fill);
- :func:`bulk_knn`: pipelined raw ``FT.SEARCH`` KNN for threshold tuning, where one round trip
  per query would dominate;
- :func:`retry_transient`: a call retried with bounded exponential backoff on a lost/refused
  connection or a timeout; :class:`RedisLost`: what a run that needs every answer raises when
  the retries are spent (or the server came back without the index);
- :func:`drop_cache`: drop the index and every key under its prefix (also keys written after the
  index vanished).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
from pydantic import Field

from retrieval.engines.redis.owned import index_missing
from retrieval.errors import BackendError, ConfigError, NotReachable, param_error
from retrieval.params import Params

if TYPE_CHECKING:
    from retrieval.embed import Embedder

VECTOR_FIELD = "prompt_vector"  # redisvl's CACHE_VECTOR_FIELD_NAME
log = logging.getLogger(__name__)
T = TypeVar("T")


# --------------------------------------------------------------------------- URL helpers


def redact_url(url: str) -> str:
    """The URL with credentials replaced by ``***`` (rwb's one policy,
    :func:`retrieval.redact.redact_uri`), safe for messages and manifests."""
    from retrieval.redact import redact_uri

    return redact_uri(url)


def is_outage(exc: BaseException) -> bool:
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


class RedisLost(BackendError):
    """Redis went away (retries spent) or came back without the index, during ``phase`` of a
    run that needs every answer. ``written``: entries written before it happened (None: not a
    writing phase)."""

    def __init__(self, url: str, phase: str, cause: str, *, written: int | None = None) -> None:
        self.url, self.phase, self.cause, self.written = url, phase, cause, written
        super().__init__(url, phase, cause)

    def __str__(self) -> str:
        return f"Redis at {self.url} {self.cause} during {self.phase}"


def lost_or_none(exc: BaseException, url: str, phase: str) -> RedisLost | None:
    """A RedisLost when ``exc`` is an outage or a vanished index, else None."""
    if isinstance(exc, RedisLost):
        return exc
    if is_outage(exc):
        return RedisLost(url, phase, "went away")
    if index_missing(exc):
        return RedisLost(url, phase, "restarted (the index vanished)")
    return None


def retry_transient(
    fn: Callable[[], T], *, retries: int, backoff_s: float,
    on_retry: Callable[[int, BaseException], None] | None = None,
) -> T:
    """``fn()``, called again up to ``retries`` times on an outage (:func:`is_outage`), sleeping
    ``backoff_s * 2**attempt`` before each (bounded: 4 retries at 0.2 s wait 3 s in all); the
    last error is raised. Other errors pass at once."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt >= retries or not is_outage(exc):
                raise
            if on_retry is not None:
                on_retry(attempt, exc)
            log.info("Redis call failed (%s); retry %d of %d", exc, attempt + 1, retries)
            time.sleep(backoff_s * (2 ** attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def drop_cache(client: Any, name: str, keys: str, *, retries: int = 2,
               backoff_s: float = 0.1) -> None:
    """Drop index ``name`` with its documents and delete every key matching the pattern ``keys``
    (e.g. ``name:*``; keys written while the index was gone are not its documents). A missing
    index is fine; an outage (after ``retries``) raises the Redis error."""
    import redis

    def run() -> None:
        try:
            client.execute_command("FT.DROPINDEX", name, "DD")
        except redis.ResponseError as exc:
            if not index_missing(exc):
                raise
        batch = [k for k in client.scan_iter(match=keys, count=1000)]
        for i in range(0, len(batch), 1000):
            client.delete(*batch[i: i + 1000])

    retry_transient(run, retries=retries, backoff_s=backoff_s)


def connect_redis(url: str, *, connect_timeout_s: float = 2.0,
                  socket_timeout_s: float = 5.0, client_name: str | None = None) -> Any:
    """A redis-py client for ``url`` that has answered PING and has the search module
    (``client_name``: the ``CLIENT SETNAME`` of its connections).

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
            retry=Retry(NoBackoff(), 0), client_name=client_name,
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
        raise NotReachable(
            f"cannot reach Redis at {shown} ({exc}); start one with `python -m "
            f"retrieval.engines.redis.server start --dir .services/redis` or set REDIS_URL"
        ) from None
    except redis.ResponseError as exc:
        raise BackendError(f"Redis at {shown} refused PING ({_short_reply(exc)})") from None
    except Exception as exc:  # InvalidResponse, or redis-py failing on a reply it cannot parse
        raise BackendError(
            f"the server at {shown} does not speak the Redis protocol (PING failed: "
            f"{type(exc).__name__}: {_short_reply(exc)}); is that port a Redis server's?"
        ) from None
    try:
        client.execute_command("FT._LIST")
    except (redis.ConnectionError, redis.TimeoutError, redis.InvalidResponse) as exc:
        raise BackendError(f"Redis at {shown} failed on FT._LIST ({_short_reply(exc)})") from None
    except redis.ResponseError as exc:
        raise BackendError(
            f"Redis at {shown} has no search module (FT._LIST: {exc}); "
            f"the semantic cache needs Redis 8 or Redis Stack"
        ) from None
    _warn_partial_results(client, shown)
    return client


_WARNED_PARTIAL: set[str] = set()


def _warn_partial_results(client: Any, shown: str) -> None:
    """Warn (once per server) when its search module answers an overrunning query with partial
    results and no error (``ON_TIMEOUT return``, RediSearch's default): a lookup that overruns
    ``TIMEOUT`` ms then reads as a miss, and a measured hit rate is too low without a sign."""
    if shown in _WARNED_PARTIAL:
        return
    try:
        conf = dict(client.execute_command("FT.CONFIG", "GET", "ON_TIMEOUT"))
        policy = conf.get(b"ON_TIMEOUT", b"").decode().lower()
        timeout_ms = dict(client.execute_command("FT.CONFIG", "GET", "TIMEOUT")).get(b"TIMEOUT")
    except Exception:  # an older or managed server without FT.CONFIG: nothing to say
        return
    if policy == "return":
        _WARNED_PARTIAL.add(shown)
        ms = timeout_ms.decode() if isinstance(timeout_ms, bytes) else "?"
        log.warning(
            "Redis at %s answers a search that overruns %s ms with partial results and no error "
            "(FT.CONFIG ON_TIMEOUT return): a slow lookup reads as a miss. Set ON_TIMEOUT FAIL "
            "(search-on-timeout fail) to see them as errors", shown, ms)


def _short_reply(exc: BaseException, limit: int = 80) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- the index


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


def embedder_vectorizer(embedder: Embedder | None, dim: int, model_id: str) -> Any:
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


def cache_schema(name: str, dim: int, params: IndexParams) -> Any:
    """redisvl's cache schema for ``name`` / ``dim``, with the HNSW attributes of ``params``."""
    from redisvl.extensions.cache.llm.schema import SemanticCacheIndexSchema

    schema = SemanticCacheIndexSchema.from_params(name, name, dim, "float32")
    if params.algorithm == "hnsw":
        spec = schema.to_dict()
        for f in spec["fields"]:
            if f["name"] == VECTOR_FIELD:
                f["attrs"].update(
                    algorithm="hnsw", m=params.m,
                    ef_construction=params.ef_construction,
                    ef_runtime=params.ef_runtime,
                    epsilon=params.epsilon,
                )
        schema = SemanticCacheIndexSchema.from_dict(spec)
    return schema


def open_cache(
    client: Any, *, name: str, url: str, dim: int, params: IndexParams, distance: float,
    vectorizer: Any, overwrite: bool,
) -> tuple[Any, Any]:
    """(the redisvl ``SearchIndex``, redisvl's ``SemanticCache`` on it). An existing index of
    ``name`` with another vector schema is a ConfigError unless ``overwrite`` (which drops it and
    its entries); Redis failures are BackendErrors naming ``url``."""
    from redisvl.extensions.cache.llm import SemanticCache as RvlSemanticCache
    from redisvl.index import SearchIndex

    index = SearchIndex(schema=cache_schema(name, dim, params), redis_client=client)
    try:
        exists = index.exists()
        if exists and not overwrite:
            live = SearchIndex.from_existing(name, redis_client=client)
            if not _same_vector_field(live.schema.to_dict(), index.schema.to_dict()):
                raise ConfigError(
                    f"semantic cache: index '{name}' at {url} exists with another "
                    f"vector schema ({_vector_attrs(live.schema.to_dict())}); pass "
                    f"overwrite=True or use another name"
                )
        if overwrite or not exists:
            index.create(overwrite=True, drop=True)
        cache = RvlSemanticCache(
            name=name,
            distance_threshold=distance,
            ttl=params.ttl_s,
            vectorizer=vectorizer,
            redis_client=client,
            create_index=False,
        )
    except ConfigError:
        raise
    except Exception as exc:
        if is_outage(exc):
            raise NotReachable(f"Redis at {url} went away during set-up: {exc}") from None
        raise BackendError(f"semantic cache '{name}' at {url}: {exc}") from exc
    return index, cache


def _vector_attrs(schema: dict[str, Any]) -> dict[str, Any]:
    for f in schema.get("fields", []):
        if f.get("name") == VECTOR_FIELD:
            attrs = dict(f.get("attrs", {}))
            return {k: attrs.get(k) for k in ("algorithm", "dims", "distance_metric", "datatype")}
    return {}


def _same_vector_field(live: dict[str, Any], wanted: dict[str, Any]) -> bool:
    a, b = _vector_attrs(live), _vector_attrs(wanted)
    return {k: str(v).lower() for k, v in a.items()} == {k: str(v).lower() for k, v in b.items()}


# --------------------------------------------------------------------------- bulk fill


def write_entries(
    client: Any, index: Any, prompts: Sequence[str], responses: Sequence[str],
    vecs: np.ndarray, ids: Sequence[str] | None, start: int, stop: int, *,
    ttl: int | None, now: float, record: str | None = None,
) -> int:
    """Rows ``start:stop`` as redisvl cache entries in one pipeline; returns the rows written.
    ``ids`` become the entry ids (keys ``<name>:<id>``); default: redisvl's hash of the prompt.
    ``record``: a Redis set the keys written are added to in the same pipeline (an rwb-owned
    cache's record, :func:`retrieval.cache.owned.written_key`)."""
    from redisvl.redis.utils import hashify

    pipe = client.pipeline(transaction=False)
    for i in range(start, stop):
        entry_id = ids[i] if ids is not None else hashify(prompts[i])
        key = index.key(entry_id)
        pipe.hset(key, mapping={
            "entry_id": entry_id, "prompt": prompts[i], "response": responses[i],
            VECTOR_FIELD: vecs[i].tobytes(), "inserted_at": now, "updated_at": now,
        })
        if ttl:
            pipe.expire(key, ttl)
        if record:
            pipe.sadd(record, key)
    pipe.execute()
    return stop - start


# --------------------------------------------------------------------------- bulk KNN


def bulk_knn(
    client: Any, name: str, vecs: np.ndarray, k: int, *, ef: int | None, batch_size: int,
    retries: int = 0, backoff_s: float = 0.1,
) -> tuple[np.ndarray, np.ndarray]:
    """KNN ``k`` for each row of ``vecs`` via pipelined ``FT.SEARCH`` on index ``name`` (``ef``:
    HNSW EF_RUNTIME, None for FLAT): (keys (n, k) object array with None for "no result",
    cosine distances (n, k) float64 with +inf for "no result"). Each batch is retried
    ``retries`` times on an outage (:func:`retry_transient`); Redis errors pass through."""
    knn = f"*=>[KNN {k} @{VECTOR_FIELD} $vec" + (
        f" EF_RUNTIME {max(ef, k)}" if ef is not None else ""
    ) + " AS __d]"
    n = vecs.shape[0]
    keys = np.full((n, k), None, dtype=object)
    dists = np.full((n, k), np.inf, dtype=np.float64)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)

        def batch(start: int = start, stop: int = stop) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for i in range(start, stop):
                pipe.execute_command(
                    "FT.SEARCH", name, knn, "PARAMS", 2, "vec", vecs[i].tobytes(),
                    "SORTBY", "__d", "ASC", "RETURN", 1, "__d", "LIMIT", 0, k,
                    "DIALECT", 2,
                )
            return list(pipe.execute())

        replies = retry_transient(batch, retries=retries, backoff_s=backoff_s)
        for row, reply in enumerate(replies, start=start):
            _parse_knn(reply, keys[row], dists[row])
    return keys, dists


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


__all__ = [
    "VECTOR_FIELD",
    "IndexParams",
    "RedisLost",
    "bulk_knn",
    "cache_schema",
    "connect_redis",
    "drop_cache",
    "embedder_vectorizer",
    "index_missing",
    "is_outage",
    "lost_or_none",
    "open_cache",
    "redact_url",
    "retry_transient",
    "write_entries",
]
