"""The production queries `rwb watch` samples from a ``.jsonl`` query log FOLLOWED as it grows
(like ``tail -f``); one pass over a log (``--once``) and the other sources (.npy / .parquet,
OTLP traces, texts, a sample of the collection) are :func:`retrieval.live.queries.load_queries`.

A log entry is a :class:`LoggedQuery`: ``key`` (the entry's ``id`` when it has one, else its
position in the log, as text: what the seeded sampling hashes), ``vector`` float32 and ``ts`` (its
timestamp in seconds since the epoch, None when the log has none).

A followed line is one JSON object with the vector under ``vector`` (or ``embedding``), optional
``id`` and ``ts`` (seconds since the epoch, or an ISO 8601 string; also ``timestamp``); a partial
last line waits for its newline; a log that shrinks was rotated and is read again from its
start.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import DataError, NotReachable

logger = logging.getLogger(__name__)

VECTOR_KEYS = ("vector", "embedding")
TS_KEYS = ("ts", "timestamp")
#: the vector of a line not sampled (never read)
_UNREAD = np.empty(0, dtype=np.float32)


@dataclass(frozen=True)
class LoggedQuery:
    """One logged production query (``ts`` in seconds since the epoch, or None)."""

    key: str
    vector: np.ndarray
    ts: float | None = None


def parse_ts(value: Any, where: str) -> float | None:
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


def parse_line(line: str, number: int, dim: int, where: str,
               keep: Callable[[str], bool] | None = None) -> LoggedQuery:
    """One JSONL line (``number`` 1-based, for messages) as a :class:`LoggedQuery` of ``dim``;
    a line whose key ``keep`` refuses (not sampled) comes back with an empty vector, unread."""
    at = f"{where}, line {number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{at}: not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{at}: each line must be a JSON object; received {type(obj).__name__}")
    key = obj.get("id")
    key = str(key) if key is not None else str(number - 1)
    if keep is not None and not keep(key):
        return LoggedQuery(key, _UNREAD)
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
    ts = next((obj[k] for k in TS_KEYS if k in obj), None)
    return LoggedQuery(key, v, parse_ts(ts, at))


def follow_jsonl(path: Path, dim: int, *, follow: bool, poll_s: float,
                 stop: threading.Event, keep: Callable[[str], bool] | None = None
                 ) -> Iterator[LoggedQuery]:
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
            if stop.is_set():  # a backlog of many lines still stops at the next one
                return
            number += 1
            text = raw.decode("utf-8", "replace").strip()
            if text:
                yield parse_line(text, number, dim, where, keep)
        if not follow:
            if pending.strip():
                number += 1
                yield parse_line(pending.decode("utf-8", "replace"), number, dim, where, keep)
            return
        if not chunk:
            stop.wait(poll_s)


__all__ = ["LoggedQuery", "follow_jsonl", "parse_line", "parse_ts"]
