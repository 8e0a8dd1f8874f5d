"""The production queries `rwb watch` samples: a query log read once (``--once``, a replay) or
FOLLOWED as it grows (like ``tail -f``), or vectors of the collection itself (``{sample: N}``,
"not production traffic").

A log entry is a :class:`LoggedQuery`: ``key`` (the entry's ``id`` when it has one, else its
position in the log, as text: what the seeded sampling hashes), ``vector`` float32 and ``ts`` (its
timestamp in seconds since the epoch, None when the log has none).

Formats (by suffix): ``.jsonl`` one JSON object a line with the vector under ``vector`` (or
``embedding``), optional ``id`` and ``ts`` (seconds since the epoch, or an ISO 8601 string; also
``timestamp``); only ``.jsonl`` can be followed (a partial last line waits for its newline; a
log that shrinks was rotated and is read again from its start). ``.npy``: a (n, dim) float
array (replayed, no ids, no timestamps). ``.parquet``: columns ``vector`` (or ``embedding``),
optional ``id`` and ``ts``.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import ConfigError, DataError, NotReachable

logger = logging.getLogger(__name__)

VECTOR_KEYS = ("vector", "embedding")
TS_KEYS = ("ts", "timestamp")
LOG_SUFFIXES = (".jsonl", ".npy", ".parquet")


@dataclass(frozen=True)
class LoggedQuery:
    """One logged production query (``ts`` in seconds since the epoch, or None)."""

    key: str
    vector: np.ndarray
    ts: float | None = None


def _ts(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            d = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise DataError(f"{where}: field 'ts' must be seconds since the epoch or an ISO 8601 "
                            f"time; received {value[:40]!r}") from None
        if d.tzinfo is None:
            d = d.replace(tzinfo=_dt.UTC)
        return d.timestamp()
    raise DataError(f"{where}: field 'ts' must be a number or a string; received "
                    f"{type(value).__name__}")


def parse_line(line: str, number: int, dim: int, where: str) -> LoggedQuery:
    """One JSONL line (``number`` 1-based, for messages) as a :class:`LoggedQuery` of ``dim``."""
    at = f"{where}, line {number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{at}: not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{at}: each line must be a JSON object; received {type(obj).__name__}")
    vec = next((obj[k] for k in VECTOR_KEYS if k in obj), None)
    if vec is None:
        got = ", ".join(sorted(obj)) or "none"
        raise DataError(f"{at}: field 'vector' (or 'embedding') is missing; rwb watch checks "
                        f"query vectors (embed texts before logging them); keys received: {got}")
    try:
        v = np.asarray(vec, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError):
        raise DataError(f"{at}: field 'vector' must be a list of numbers") from None
    if v.shape[0] != dim:
        raise DataError(f"{at}: field 'vector' must have the collection's dimension {dim}; "
                        f"received {v.shape[0]}")
    key = obj.get("id")
    ts = next((obj[k] for k in TS_KEYS if k in obj), None)
    return LoggedQuery(str(key) if key is not None else str(number - 1), v, _ts(ts, at))


def follow_jsonl(path: Path, dim: int, *, follow: bool, poll_s: float,
                 stop: threading.Event) -> Iterator[LoggedQuery]:
    """The entries of a JSONL log, then (``follow``) those appended later, until ``stop`` is
    set; a partial last line waits for its newline; a log that shrinks is read again from its
    start (rotated)."""
    where = str(path)
    pos, number, pending = 0, 0, b""
    while not stop.is_set():
        try:
            size = path.stat().st_size
            if size < pos:
                logger.warning("%s shrank (%d < %d bytes): rotated, reading it from its start",
                               path, size, pos)
                pos, pending = 0, b""
            with open(path, "rb") as fh:
                fh.seek(pos)
                chunk = fh.read()
        except FileNotFoundError:
            if not follow:
                raise NotReachable(f"query log '{path}' does not exist") from None
            chunk = b""
        pos += len(chunk)
        data = pending + chunk
        lines = data.split(b"\n")
        pending = lines.pop()
        for raw in lines:
            number += 1
            text = raw.decode("utf-8", "replace").strip()
            if text:
                yield parse_line(text, number, dim, where)
        if not follow:
            if pending.strip():
                number += 1
                yield parse_line(pending.decode("utf-8", "replace"), number, dim, where)
            return
        if not chunk:
            stop.wait(poll_s)


def _rows(vectors: np.ndarray, ids: list[Any] | None, ts: list[Any] | None, dim: int,
          where: str) -> Iterator[LoggedQuery]:
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise DataError(f"{where}: query vectors must be (n, {dim}) (the collection's "
                        f"dimension); received shape {tuple(vectors.shape)}")
    for i in range(vectors.shape[0]):
        key = str(ids[i]) if ids is not None and ids[i] is not None else str(i)
        yield LoggedQuery(key, vectors[i].astype(np.float32),
                          _ts(ts[i], where) if ts is not None else None)


def read_npy(path: Path, dim: int) -> Iterator[LoggedQuery]:
    """A (n, dim) .npy of query vectors (a replay: no ids, no timestamps)."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise NotReachable(f"query log '{path}' does not exist") from None
    except ValueError as exc:
        raise DataError(f"{path}: not a .npy array ({exc})") from None
    return _rows(np.asarray(arr, dtype=np.float32), None, None, dim, str(path))


def read_parquet(path: Path, dim: int) -> Iterator[LoggedQuery]:
    """A parquet log: ``vector`` (or ``embedding``), optional ``id`` and ``ts`` columns."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise NotReachable(f"query log '{path}' does not exist")
    table = pq.read_table(path)
    names = table.column_names
    col = next((c for c in VECTOR_KEYS if c in names), None)
    if col is None:
        raise DataError(f"{path}: column 'vector' (or 'embedding') is missing; columns: "
                        f"{', '.join(names)}")
    vectors = np.asarray(table.column(col).to_pylist(), dtype=np.float32)
    ids = table.column("id").to_pylist() if "id" in names else None
    tcol = next((c for c in TS_KEYS if c in names), None)
    ts = table.column(tcol).to_pylist() if tcol else None
    if ts is not None:
        ts = [x.timestamp() if isinstance(x, _dt.datetime) else x for x in ts]
    return _rows(vectors, ids, ts, dim, str(path))


def log_queries(path: Path, dim: int, *, follow: bool, poll_s: float,
                stop: threading.Event) -> Iterator[LoggedQuery]:
    """The entries of the log at ``path`` by its suffix; ``follow`` only for ``.jsonl``."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return follow_jsonl(path, dim, follow=follow, poll_s=poll_s, stop=stop)
    if suffix not in LOG_SUFFIXES:
        raise ConfigError(f"field 'queries.log' must be a {', '.join(LOG_SUFFIXES)} file; "
                          f"received {path.name!r}")
    if follow:
        logger.info("%s is replayed once: only a .jsonl log can be followed", path)
    return read_npy(path, dim) if suffix == ".npy" else read_parquet(path, dim)


def collection_sample(vectors: np.ndarray, ids: np.ndarray) -> Iterator[LoggedQuery]:
    """Vectors of the collection itself as queries (NOT production traffic), keyed by their ids,
    stamped with the time they are read."""
    for i in range(vectors.shape[0]):
        yield LoggedQuery(str(int(ids[i])), vectors[i].astype(np.float32), time.time())


__all__ = ["LOG_SUFFIXES", "LoggedQuery", "collection_sample", "follow_jsonl", "log_queries",
           "parse_line", "read_npy", "read_parquet"]
