"""Attach read-only to a user's Redis vector index (``live: {engine: redis, url, index}``;
:mod:`retrieval.indexes.live`).

``FT.INFO`` names everything else: the vector field (its type HNSW / FLAT / SVS-VAMANA, data
type, dimension, distance metric and build attributes), the key type (HASH or JSON) and the key
prefixes. An index with several vector fields needs ``vector_field`` (the attribute name). Ids
are the integer after the prefix (``item:1000007`` -> 1000007); a key that is not
``<prefix><integer>`` is refused in one line (every key checked by one ``SCAN`` pass at
attach, keys only, and every key read later).

Read-only: only ``PING``, ``FT.INFO``, ``FT._LIST``, ``FT.SEARCH``, ``SCAN``, ``HMGET`` /
``JSON.GET``: never ``FT.CREATE`` / ``FT.ALTER`` / ``FT.DROPINDEX``, ``HSET``, ``DEL`` or
anything else that writes. Knob: ``EF_RUNTIME`` (HNSW: a per-query parameter of the KNN
clause, ``[1, 4096]``, searched with ``max(EF_RUNTIME, k)``); none for FLAT.
Distances: Redis L2 (squared) and COSINE (``1 - cos``) as rwb's; IP (``1 - <x, q>``) becomes
``-<x, q>``.

Exact: Redis has no per-query exact switch on an HNSW field, so ``search_exact`` is rwb's own
brute force over the snapshot. Snapshot: every key of the prefixes (``SCAN MATCH``), sorted by
id (a stable order for ``start``), vectors read with ``HMGET`` (hash: raw little-endian
floats) or ``JSON.GET`` (JSON), in pipelines of ``batch`` keys; keys without the vector field
(not in the index) are skipped. An index ON JSON is implemented but not tested here (the Redis
of rwb's tests has no JSON module): its description's ``untested`` says so.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from retrieval.errors import BackendError, ConfigError, NotReachable, param_error
from retrieval.indexes.base import SearchResult
from retrieval.indexes.live import LiveDescription, LiveKnob
from retrieval.indexes.live_util import (
    LiveSection,
    check_expected,
    check_k,
    check_queries,
    check_search_params,
    exact_from_snapshot,
    label,
    one_line,
    pack_hits,
    parse_section,
)
from retrieval.redact import redact_uri

log = logging.getLogger(__name__)

METRIC = {"L2": "l2", "IP": "ip", "COSINE": "cosine"}
DTYPE = {"FLOAT32": np.float32, "FLOAT64": np.float64, "FLOAT16": np.float16}
EF_MAX = 4096
UNTESTED_JSON = ("an index ON JSON is not tested here: the Redis of rwb's tests has no JSON "
                 "module (hash indexes are)")
#: the score alias of rwb's KNN clause
SCORE = "__rwb_distance"


class RedisLive(LiveSection):
    """``live:`` keys of a Redis index: ``url`` (``redis://[:password@]host:port[/db]``, e.g.
    ``${REDIS_URL}``), ``index``; ``vector_field`` only when the index has several."""

    url: str
    index: str
    vector_field: str | None = None


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _pairs(flat: list[Any]) -> dict[str, Any]:
    return {_text(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}


class RedisLiveCollection:
    """A read-only handle on a Redis vector index (see the module docstring)."""

    def __init__(self, spec: RedisLive, where: str | None) -> None:
        self.spec, self.where = spec, label(where, "redis")
        self._params: dict[str, int] = {}
        self._r = self._connect(spec)
        try:
            self._inspect(spec, where)
            check_expected(spec, self._dim, self.metric, spec.index, where)
            self._check_keys()
        except BaseException:
            self.close()
            raise

    # --- attach -----------------------------------------------------------------------------
    def _connect(self, spec: RedisLive) -> Any:
        import redis

        try:
            r = redis.Redis.from_url(spec.url, socket_timeout=30, socket_connect_timeout=5)
            r.ping()
            return r
        except Exception as exc:
            raise NotReachable(f"{self.where}: cannot reach Redis at {redact_uri(spec.url)!r}: "
                               f"{one_line(exc)}") from None

    def _failed(self, what: str, exc: BaseException) -> BackendError:
        """NotReachable (exit 3) when the connection was lost mid-call (the server went away),
        else BackendError (exit 2)."""
        import redis

        if isinstance(exc, redis.ConnectionError):
            return NotReachable(f"{self.where}: {what} failed, Redis is not reachable "
                                f"(connection lost): {one_line(exc)}")
        return BackendError(f"{self.where}: {what} failed: {one_line(exc)}")

    def _cmd(self, *args: Any) -> Any:
        try:
            return self._r.execute_command(*args)
        except Exception as exc:
            raise self._failed(f"Redis {args[0]}", exc) from None

    def _inspect(self, spec: RedisLive, where: str | None) -> None:
        names = sorted(_text(n) for n in self._cmd("FT._LIST"))
        if spec.index not in names:
            raise param_error("live.index", f"an index at the URL ({', '.join(names) or 'none'})",
                              spec.index, where=where)
        info = self._r.ft(spec.index).info()
        definition = info.get("index_definition", {})
        if isinstance(definition, list):
            definition = _pairs(definition)
        self._key_type = _text(definition.get("key_type", "HASH")).upper()
        self._prefixes = [_text(p) for p in definition.get("prefixes", [])] or [""]
        vectors = [_pairs(a) for a in info.get("attributes", [])
                   if _text(_pairs(a).get("type", "")).upper() == "VECTOR"]
        if not vectors:
            raise ConfigError(f"{where}: live.index '{spec.index}' has no VECTOR field")
        by_name = {_text(v["attribute"]): v for v in vectors}
        if spec.vector_field is not None and spec.vector_field not in by_name:
            raise param_error("live.vector_field", f"a VECTOR field of '{spec.index}' "
                              f"({', '.join(by_name)})", spec.vector_field, where=where)
        if spec.vector_field is None and len(by_name) > 1:
            raise param_error("live.vector_field", f"set to one of {', '.join(by_name)} (the "
                              f"index has several VECTOR fields)", None, where=where)
        field = by_name[spec.vector_field or next(iter(by_name))]
        self._field = {k: (_text(v) if isinstance(v, bytes) else v) for k, v in field.items()}
        self._dim = int(self._field["dim"])
        dtype = str(self._field.get("data_type", "FLOAT32")).upper()
        mt = str(self._field.get("distance_metric", "L2")).upper()
        if dtype not in DTYPE or mt not in METRIC:
            raise ConfigError(f"{where}: live.index '{spec.index}': data type {dtype} / metric "
                              f"{mt} not measurable by rwb (data types {', '.join(DTYPE)}; "
                              f"metrics {', '.join(METRIC)})")
        self._dtype, self.metric = DTYPE[dtype], METRIC[mt]
        self._info = info

    def _id(self, key: Any) -> int:
        text = _text(key)
        for p in self._prefixes:
            if text.startswith(p) and re.fullmatch(r"-?[0-9]+", text[len(p):]):
                return int(text[len(p):])
        raise ConfigError(f"{self.where}: key {text!r} of index '{self.spec.index}' is not "
                          f"<prefix><integer> (prefixes {self._prefixes}); rwb needs integer "
                          f"ids")

    def _check_keys(self) -> None:
        """Every key of the prefixes is ``<prefix><integer>`` (one ``SCAN`` pass, keys only)."""
        try:
            self._keys()
        except ConfigError:
            raise
        except Exception as exc:
            raise self._failed("Redis SCAN", exc) from None

    # --- LiveCollection ---------------------------------------------------------------------
    def _algorithm(self) -> str:
        return str(self._field.get("algorithm", "")).upper()

    def describe(self) -> LiveDescription:
        """The index as ``FT.INFO`` reports it (see the module docstring)."""
        info = self._r.ft(self.spec.index).info()
        skip = {"identifier", "attribute", "type", "algorithm", "data_type", "dim",
                "distance_metric"}
        build = {k: v for k, v in self._field.items() if k not in skip}
        details = {"url": redact_uri(self.spec.url), "key_type": self._key_type,
                   "prefixes": self._prefixes, "vector_field": self._field.get("attribute"),
                   "data_type": self._field.get("data_type"),
                   "distance_metric": self._field.get("distance_metric"),
                   "percent_indexed": float(info.get("percent_indexed", 1.0)),
                   "vector_index_bytes": int(float(info.get("vector_index_sz_mb", 0)) * 2**20)}
        return LiveDescription(engine="redis", name=self.spec.index, dim=self._dim,
                               metric=self.metric, index_kind=self._algorithm() or None,
                               build_params=build, rows=int(info.get("num_docs", 0)),
                               segments=None, details=details,
                               untested=UNTESTED_JSON if self._key_type == "JSON" else None)

    def knobs(self) -> tuple[LiveKnob, ...]:
        """``EF_RUNTIME`` for HNSW (default the index's ``ef_runtime``, 10); none for FLAT."""
        if self._algorithm() != "HNSW":
            return ()
        default = int(self._field.get("ef_runtime", 10))
        return (LiveKnob("EF_RUNTIME", "EF_RUNTIME", 1, EF_MAX, default),)

    def set_search_params(self, **params: Any) -> None:
        """Set knobs (names from :meth:`knobs`); an unknown or out-of-range one: ConfigError."""
        self._params.update(check_search_params(self.knobs(), params, self.where))

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k by ``FT.SEARCH ... KNN`` (DIALECT 2), one pipeline per batch of queries."""
        k = check_k(k, self.where)
        x = check_queries(queries, self._dim, self.where)
        ef = (f" EF_RUNTIME {max(self._params['EF_RUNTIME'], k)}"
              if "EF_RUNTIME" in self._params else "")
        field = self._field["attribute"]
        text = f"*=>[KNN {k} @{field} $BLOB{ef} AS {SCORE}]"
        pipe = self._r.pipeline(transaction=False)
        for row in x:
            pipe.execute_command("FT.SEARCH", self.spec.index, text, "PARAMS", 2, "BLOB",
                                 row.astype(self._dtype).tobytes(), "SORTBY", SCORE, "ASC",
                                 "RETURN", 1, SCORE, "LIMIT", 0, k, "DIALECT", 2)
        try:
            replies = pipe.execute()
        except Exception as exc:
            raise self._failed("Redis FT.SEARCH", exc) from None
        hits = []
        for rep in replies:
            ids, dist = [], []
            for key, d in _results(rep):
                ids.append(self._id(key))
                dist.append(d - 1.0 if self.metric == "ip" else d)
            hits.append((ids, dist))
        return pack_hits(hits, len(x), k)

    def search_exact(self, queries: np.ndarray, k: int) -> SearchResult:
        """rwb's brute force over the snapshot (Redis has no per-query exact path)."""
        k = check_k(k, self.where)
        x = check_queries(queries, self._dim, self.where)
        return exact_from_snapshot(self, x, k, self.metric)  # type: ignore[arg-type]

    def _keys(self) -> list[tuple[int, bytes]]:
        out: dict[int, bytes] = {}
        for p in self._prefixes:
            for key in self._r.scan_iter(match=_glob(p) + "*", count=1000):
                out[self._id(key)] = key
        return sorted(out.items())

    def iter_vectors(self, batch: int = 10_000, start: int = 0
                     ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(ids int64, vectors float32)`` batches in id order, from row ``start``."""
        if batch < 1 or start < 0:
            raise ConfigError(f"{self.where}: iter_vectors needs batch >= 1 and start >= 0; "
                              f"received batch={batch}, start={start}")
        try:
            keys = self._keys()[start:]
        except ConfigError:
            raise
        except Exception as exc:
            raise self._failed("Redis SCAN", exc) from None
        ident = self._field["identifier"]
        for s in range(0, len(keys), batch):
            part = keys[s:s + batch]
            pipe = self._r.pipeline(transaction=False)
            for _, key in part:
                if self._key_type == "JSON":
                    pipe.execute_command("JSON.GET", key, ident)
                else:
                    pipe.execute_command("HMGET", key, ident)
            ids, vecs = [], []
            for (i, _), raw in zip(part, pipe.execute()):
                v = self._vector(raw)
                if v is not None:
                    ids.append(i)
                    vecs.append(v)
            if ids:
                yield (np.asarray(ids, dtype=np.int64),
                       np.asarray(vecs, dtype=np.float32).reshape(len(ids), self._dim))

    def _vector(self, raw: Any) -> np.ndarray | None:
        if self._key_type == "JSON":
            if raw is None:
                return None
            got = json.loads(_text(raw))
            got = got[0] if got and isinstance(got[0], list) else got
            return np.asarray(got, dtype=np.float32) if len(got) == self._dim else None
        blob = raw[0] if isinstance(raw, list) else raw
        if blob is None or len(blob) != self._dim * np.dtype(self._dtype).itemsize:
            return None
        return np.frombuffer(blob, dtype=self._dtype).astype(np.float32)

    def close(self) -> None:
        """Close the connection pool (nothing to write)."""
        r, self._r = getattr(self, "_r", None), None
        if r is not None:
            r.close()


def _results(rep: Any) -> list[tuple[Any, float]]:
    """``(key, score)`` of an ``FT.SEARCH`` reply, RESP2 (a flat list) or RESP3 (a map)."""
    if isinstance(rep, dict):
        rows = {_text(k): v for k, v in rep.items()}.get("results", [])
        out = []
        for row in rows:
            row = {_text(k): v for k, v in row.items()}
            extra = {_text(k): v for k, v in row.get("extra_attributes", {}).items()}
            out.append((row["id"], float(_text(extra[SCORE]))))
        return out
    return [(rep[j], float(_text(_pairs(rep[j + 1])[SCORE]))) for j in range(1, len(rep) - 1, 2)]


def _glob(prefix: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", prefix)


def attach(section: Mapping[str, Any], where: str | None = None) -> RedisLiveCollection:
    """The engine descriptor's ``attach`` hook for Redis."""
    return RedisLiveCollection(parse_section(RedisLive, section, where), where)


__all__ = ["RedisLive", "RedisLiveCollection", "attach"]
