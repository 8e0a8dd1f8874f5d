"""What the Milvus backend's modules share: names and the metric mapping, URI redaction, the
pymilvus log silencer, id checks, and turning Milvus hits into a :class:`SearchResult`. Not a
backend module (the backend is :mod:`retrieval.engines.milvus.index`)."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from retrieval.errors import BackendError, DataError
from retrieval.indexes.base import SearchResult
from retrieval.redact import redact_uri  # the one redaction policy (re-exported here)

URI_ENV = "RWB_MILVUS_URI"
TOKEN_ENV = "RWB_MILVUS_TOKEN"
METRIC = {"l2": "L2", "ip": "IP", "cosine": "COSINE"}
PK, VEC = "id", "vec"
WHERE = "backend 'milvus'"


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


#: set while rwb's own RPC runs in this thread / asyncio task (see :func:`quiet_call`)
_IN_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("rwb_milvus_call",
                                                               default=False)


class _DropInCalls(logging.Filter):
    """Drops pymilvus's records (an error traceback per failed RPC, a warning per failed
    reconnect) logged while one of rwb's calls runs: rwb raises its own one-line error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _IN_CALL.get()


_CALL_FILTER = _DropInCalls()


def install_call_filter() -> None:
    """Put the filter on every pymilvus / milvus_lite logger that exists (call after importing
    pymilvus; idempotent). A logger's filter sees the records logged on it, so each one gets it."""
    for name, obj in list(logging.root.manager.loggerDict.items()):
        if (isinstance(obj, logging.Logger) and name.partition(".")[0] in _NOISY_LOGGERS
                and _CALL_FILTER not in obj.filters):
            obj.addFilter(_CALL_FILTER)


@contextlib.contextmanager
def quiet_call() -> Iterator[None]:
    """pymilvus's logging silenced in this thread / task only, while the block runs: cheap
    enough for the search hot path (no lock, no logger level change), for many client threads
    (a Milvus server killed mid-load logged ~30,000 lines of tracebacks without it)."""
    token = _IN_CALL.set(True)
    try:
        yield
    finally:
        _IN_CALL.reset(token)


def check_ids(ids: np.ndarray | None, n: int) -> np.ndarray:
    """Build ids as int64 primary keys (default ``0..n-1``): shape ``(n,)``, integers, unique,
    never -1 (rwb's "no result")."""
    if ids is None:
        return np.arange(n, dtype=np.int64)
    arr = np.asarray(ids)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise DataError(f"{WHERE} build ids: expected shape ({n},); received {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"{WHERE} build ids: expected integers; received dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if (arr == -1).any():
        raise DataError(f"{WHERE} build ids: -1 is reserved for 'no result'")
    if np.unique(arr).shape[0] != n:
        raise DataError(f"{WHERE} build ids: must be unique (Milvus primary keys)")
    return arr


def to_result(parts: list[Any], nq: int, k: int, metric: str) -> SearchResult:
    """Milvus search answers (one list of hits per query, over ``parts`` calls) as an rwb
    SearchResult: -1 / +inf padded to ``k``, distances converted to rwb's lower-is-closer
    convention for ``metric`` (``-ip``, ``1 - cos``), rows sorted by distance."""
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
        raise BackendError(f"{WHERE}: Milvus answered {row} result lists for {nq} queries")
    valid = ids >= 0
    if metric == "ip":
        dist = np.where(valid, -dist, np.inf)
    elif metric == "cosine":
        dist = np.where(valid, 1.0 - dist, np.inf)
    dist = dist.astype(np.float32, copy=False)
    order = np.argsort(dist, axis=1, kind="stable")
    ids = np.take_along_axis(ids, order, axis=1)
    dist = np.take_along_axis(dist, order, axis=1)
    return SearchResult(ids=ids, distances=dist)


__all__ = [
    "METRIC",
    "PK",
    "TOKEN_ENV",
    "URI_ENV",
    "VEC",
    "WHERE",
    "check_ids",
    "quiet_pymilvus",
    "redact_uri",
    "to_result",
]
