"""Semantic cache on a real Redis (8.x or Redis Stack with the search module), through redisvl.

The cache is redisvl's ``SemanticCache`` (0.28): one Redis hash per entry (prompt, response,
float32 prompt vector) under a search index with a COSINE vector field, and lookups as a
``VECTOR_RANGE`` query returning the nearest entry whose cosine distance is <= the threshold.
rwb adds four things around it:

- **typed thresholds** (:class:`retrieval.cache.thresholds.Threshold`): a value with its unit,
  ``cosine_distance`` (0..2, lower is stricter; what Redis compares) or ``cosine_similarity``
  (-1..1, higher is stricter), and exact conversions to the parameter each library takes;
- **vectors from an rwb Embedder** (or precomputed vectors), never redisvl's default model
  (which would be downloaded from the hub);
- an **HNSW** vector index when asked (redisvl's cache schema is FLAT, brute force); the index is
  created from redisvl's own cache schema with only the algorithm changed, and redisvl is told
  to use it (:mod:`retrieval.cache.redis`);
- **fault handling**: an unreachable Redis at start raises :class:`BackendError` naming the URL
  (password hidden) within ``connect_timeout_s``; when Redis goes away mid-run, lookups are
  bypassed to a miss and counted (``bypassed``), stores are retried ``store_retries`` times and
  then counted as lost; nothing raises. After a failure Redis is not tried again for
  ``outage_cooldown_s`` seconds (those lookups are bypassed too), then it is retried. A run that
  needs every answer (threshold tuning) opens the cache with ``on_outage="raise"``: every call
  is retried ``store_retries`` times with exponential backoff, then raises
  :class:`retrieval.cache.redis.RedisLost` (also when the server came back without the index).

Why redisvl and not raw redis-py search commands: redisvl's ``SemanticCache`` is what users
deploy (LangChain's ``langchain_redis.RedisSemanticCache`` wraps it too), so tuning through it
measures the real lookup path, and its schema/threshold semantics are the ones exported. Raw
pipelined ``FT.SEARCH`` is used only for the bulk KNN distance fetch of threshold tuning
(:meth:`SemanticCache.nearest`), where one round trip per query would dominate.

:func:`time_lookups` times single lookups against a filled cache (:mod:`retrieval.timing`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from retrieval.cache.owned import (
    claim,
    client_name,
    drop_owned,
    new_run_id,
    release,
    written_key,
)
from retrieval.cache.redis import (
    VECTOR_FIELD,
    IndexParams,
    RedisLost,
    bulk_knn,
    connect_redis,
    drop_cache,
    embedder_vectorizer,
    index_missing,
    is_outage,
    lost_or_none,
    open_cache,
    redact_url,
    retry_transient,
    write_entries,
)
from retrieval.cache.thresholds import Threshold
from retrieval.errors import BackendError, ConfigError, param_error
from retrieval.timing import time_each, warm_up

if TYPE_CHECKING:
    from retrieval.embed import Embedder

log = logging.getLogger(__name__)


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


class SemanticCache:
    """A semantic LLM-response cache in Redis (redisvl ``SemanticCache`` underneath).

    ``threshold``: a hit needs cosine distance <= ``threshold.cosine_distance``. ``embedder``
    turns prompts into vectors (it may be None when every call passes ``vector=``; then ``dim``
    is required). ``overwrite`` drops an existing index of the same name (and its entries).
    ``exclusive`` (what rwb's own runs use): the name must be unused (no index, no key under
    ``<name>:``), it is claimed with a run marker (:mod:`retrieval.cache.owned`) and
    :meth:`drop` removes only what this instance created; an existing one is a ConfigError.
    ``on_outage``: ``"bypass"`` (serving: lookups miss, stores are counted lost) or ``"raise"``
    (a run that needs every answer: retried, then :class:`RedisLost`). Timeouts are in seconds.
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
        exclusive: bool = False,
        connect_timeout_s: float = 2.0,
        socket_timeout_s: float = 5.0,
        store_retries: int = 2,
        retry_backoff_s: float = 0.05,
        outage_cooldown_s: float = 0.5,
        on_outage: Literal["bypass", "raise"] = "bypass",
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
        if on_outage not in ("bypass", "raise"):
            raise param_error("on_outage", "'bypass' or 'raise'", on_outage,
                              where="semantic cache")
        self.strict = on_outage == "raise"
        self._down_until = 0.0
        self._counts = dict.fromkeys(CacheStats.__dataclass_fields__, 0)
        if dim is None:
            if embedder is None:
                raise param_error("dim", "given when no embedder is passed", None,
                                  where="semantic cache")
            dim = int(embedder.dim)
        self.dim = int(dim)
        self.model_id = embedder.model_id if embedder is not None else "precomputed"
        if exclusive and overwrite:
            raise param_error("overwrite", "False when exclusive (rwb never drops an index it "
                              "did not create)", overwrite, where="semantic cache")
        self._run_id = new_run_id() if exclusive else None
        #: the set recording the keys this run writes (an rwb-owned cache only)
        self._record = written_key(name) if exclusive else None
        self._client = connect_redis(redis_url, connect_timeout_s=connect_timeout_s,
                                     socket_timeout_s=socket_timeout_s,
                                     client_name=client_name(self._run_id)
                                     if self._run_id else None)
        if self._run_id is None:
            self._cache = self._open(overwrite)
            return
        try:
            claim(self._client, self.name, self.url, self._run_id, what="semantic cache")
        except ConfigError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise BackendError(f"semantic cache '{self.name}' at {self.url}: cannot claim the "
                               f"name ({exc})") from None
        try:
            self._cache = self._open(False)
        except BaseException:
            with contextlib.suppress(Exception):
                release(self._client, self.name, self._run_id)
            self.close()
            raise

    # -- set-up ---------------------------------------------------------------------------

    def _open(self, overwrite: bool) -> Any:
        self._index, cache = open_cache(
            self._client, name=self.name, url=self.url, dim=self.dim, params=self.params,
            distance=self._threshold.cosine_distance,
            vectorizer=embedder_vectorizer(self._embedder, self.dim, self.model_id),
            overwrite=overwrite,
        )
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
            return int(self.call("reading the index size",
                                 lambda: self._index.info()["num_docs"]))
        except RedisLost:
            raise
        except Exception as exc:
            raise BackendError(f"Redis at {self.url}: cannot read index size ({exc})") from None

    def call(self, phase: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` retried on an outage like a store; in ``raise`` mode an outage or a vanished
        index that survives the retries is a :class:`RedisLost` naming ``phase``."""
        try:
            return retry_transient(fn, retries=self.store_retries, backoff_s=self.retry_backoff_s)
        except Exception as exc:
            lost = lost_or_none(exc, self.url, phase) if self.strict else None
            if lost is not None:
                raise lost from None
            raise

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
        first = (self._down_until == 0.0 or self._counts["bypassed"] == 0) and not self.strict
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
        if not self._available() and not self.strict:
            return self._bypass()

        def check() -> list[dict[str, Any]]:
            if self.params.lookup == "knn":
                return self._knn_check(vec, thr)
            return list(self._cache.check(vector=vec.tolist(), num_results=1,
                                          distance_threshold=thr))

        try:
            hits = self.call("a lookup", check) if self.strict else check()
        except RedisLost:
            raise
        except Exception as exc:
            if is_outage(exc):
                self._mark_down("lookup", exc)
                return self._bypass()
            if index_missing(exc):
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
            if is_outage(exc):
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
        if not self._available() and not self.strict:
            self._counts["stores_lost"] += n
            return None
        last: BaseException | None = None
        for attempt in range(self.store_retries + 1):
            if attempt:
                self._counts["store_retries"] += 1
                time.sleep(self.retry_backoff_s * (2 ** (attempt - 1)))
            try:
                result = fn()
            except Exception as exc:
                if not is_outage(exc):
                    raise BackendError(f"semantic cache '{self.name}' at {self.url}: {what} "
                                       f"failed: {exc}") from exc
                self._mark_down(what, exc)
                last = exc
                continue
            self._down_until = 0.0
            return result
        if self.strict:
            raise RedisLost(self.url, what, "went away") from last
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
        if self._record:  # an rwb-owned cache records what it wrote (services cleanup)
            with contextlib.suppress(Exception):
                self._client.sadd(self._record, str(key))
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

        Each batch is retried on outage and counted lost if it still fails (``raise`` mode:
        :class:`RedisLost` with ``written`` = the entries of the batches before). ``ids`` become
        the entry ids (keys ``<name>:<id>``); default: redisvl's hash of the prompt.
        """
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
                return write_entries(self._client, self._index, prompts, responses, vecs, ids,
                                     start, stop, ttl=ttl, now=now, record=self._record)

            try:
                done = self._retrying("store_many batch", stop - start, write)
            except RedisLost as exc:
                exc.written = stored
                raise
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
        distance; each batch is retried ``store_retries`` times first; ``raise`` mode: a
        :class:`RedisLost`).
        """
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise param_error("vectors", f"an (n, {self.dim}) matrix", vecs.shape,
                              where="semantic cache nearest")
        if k < 1:
            raise param_error("k", "an integer >= 1", k, where="semantic cache nearest")
        ef = ef_runtime or self.params.ef_runtime
        try:
            return bulk_knn(self._client, self.name, vecs, k, batch_size=batch_size,
                            ef=ef if self.params.algorithm == "hnsw" else None,
                            retries=self.store_retries, backoff_s=self.retry_backoff_s)
        except BackendError:
            raise
        except Exception as exc:
            lost = lost_or_none(exc, self.url, "the KNN fetch") if self.strict else None
            if lost is not None:
                raise lost from None
            raise BackendError(f"semantic cache '{self.name}' at {self.url}: KNN failed: "
                               f"{exc}") from None

    # -- housekeeping ---------------------------------------------------------------------

    def clear(self) -> None:
        """Delete every entry, keep the index."""
        self._cache.clear()

    def drop(self) -> None:
        """Drop the index, its entries and any other key under its prefix (keys written while
        the index was gone); a missing index is fine. An ``exclusive`` cache drops them only
        while its run marker is its own (then the marker too). BackendError when Redis is
        unreachable."""
        run_id = self._run_id
        try:
            if run_id is not None:
                recreated = self._counts["index_recreated"] > 0
                retry_transient(lambda: drop_owned(self._client, self.name, run_id,
                                                   recreated=recreated),
                                retries=min(self.store_retries, 2),
                                backoff_s=self.retry_backoff_s)
                return
            drop_cache(self._client, self.name, self.key_pattern,
                       retries=min(self.store_retries, 2), backoff_s=self.retry_backoff_s)
        except Exception as exc:
            raise BackendError(f"semantic cache '{self.name}' at {self.url}: drop failed: "
                               f"{exc}") from None

    @property
    def key_pattern(self) -> str:
        """The pattern of this cache's keys (``<name>:*``), for SCAN / a manual clean-up."""
        return str(self._index.key("*"))

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


# --------------------------------------------------------------------------- lookup latency


def time_lookups(cache: SemanticCache, vectors: np.ndarray, warmup: int,
                 threshold: Threshold) -> dict[str, Any]:
    """Single-query lookup latency (ms) through redisvl ``check`` (vector given), timed with
    :func:`retrieval.timing.time_each` (gc paused: a collection inside one timed call would be
    charged to Redis)."""

    def one(v: np.ndarray) -> Lookup:
        return cache.lookup("", vector=v, threshold=threshold)

    rows = list(vectors)
    warm_up(one, rows, min(warmup, len(rows)))
    before = cache.stats()
    _, times = time_each(one, rows)
    after = cache.stats()
    if after.bypassed > before.bypassed:
        raise RedisLost(cache.url, "the lookup timing", "went away")
    return {
        "p50_ms": float(np.percentile(times, 50)), "p95_ms": float(np.percentile(times, 95)),
        "p99_ms": float(np.percentile(times, 99)), "mean_ms": float(times.mean()),
        "queries": len(vectors), "hit_fraction": (after.hits - before.hits) / len(vectors),
        "threshold": threshold.to_dict(), "mode": "single query, sequential, 1 client, vector "
        "given (embedding excluded), redisvl SemanticCache.check",
    }


__all__ = [
    "CacheStats",
    "Lookup",
    "SemanticCache",
    "time_lookups",
]
