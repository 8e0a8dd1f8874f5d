"""rwb's marker on what it creates in a Redis it does not own (the vector indexes of backend
``redis`` here; the semantic caches in :mod:`retrieval.cache.owned`, which uses the same
marker), so that ``rwb services cleanup`` can list and remove what a killed run left, and
nothing else (:func:`collect_leftovers`, the engine's leftover hook).

Marker: a key ``{rwb}owned:<name>`` written with ``SET NX`` before the index ``<name>`` is
created, holding a JSON record (run id, index, key prefix ``<name>:``, host, pid, created,
what). Liveness: the run's connections carry the name ``rwb-<run id>`` (``CLIENT SETNAME``);
a marker whose run has no connection left was left by a killed run. Names never contain ``{``,
so no index prefix covers a marker.

A semantic cache's run also records every key it writes in the set ``{rwb}written:<name>``
(:func:`written_key`), so :func:`remove_leftover` drops a semantic cache's index without its
documents and deletes only the recorded keys (:func:`drop_recorded`): a key an application
wrote under a killed run's leftover name survives ``rwb services cleanup --yes``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

from retrieval.errors import ConfigError

MARKER_PREFIX = "{rwb}owned:"
CLIENT_PREFIX = "rwb-"
#: the set of the keys a semantic cache's run wrote (see the module doc)
WRITTEN_PREFIX = "{rwb}written:"

log = logging.getLogger(__name__)


def marker_key(name: str) -> str:
    return f"{MARKER_PREFIX}{name}"


def written_key(name: str) -> str:
    """The Redis set recording the keys the run that owns ``name`` wrote."""
    return f"{WRITTEN_PREFIX}{name}"


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def client_name(run_id: str) -> str:
    """The ``CLIENT SETNAME`` of a run's connections (how cleanup tells it alive)."""
    return f"{CLIENT_PREFIX}{run_id}"


def marker_record(name: str, run_id: str, what: str) -> dict[str, Any]:
    """The JSON record a marker holds (see the module doc)."""
    return {"run": run_id, "index": name, "prefix": f"{name}:", "host": socket.gethostname(),
            "pid": os.getpid(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "what": what}


def set_marker(client: Any, name: str, run_id: str, what: str) -> bool:
    """Write ``name``'s marker for ``run_id`` unless one exists (False then)."""
    return bool(client.set(marker_key(name), json.dumps(marker_record(name, run_id, what)),
                           nx=True))


def marker_run(client: Any, name: str) -> str | None:
    """The run id ``name``'s marker names (None: no marker; ``?`` an unreadable one)."""
    raw = client.get(marker_key(name))
    if raw is None:
        return None
    try:
        rec = json.loads(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
    except ValueError:
        return "?"
    return str(rec.get("run")) if isinstance(rec, dict) else "?"


def index_missing(exc: BaseException) -> bool:
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


def text_of(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def index_exists(client: Any, name: str) -> bool:
    return name in {text_of(n) for n in client.execute_command("FT._LIST")}


def read_marker(client: Any, name: str) -> dict[str, Any] | None:
    raw = client.get(marker_key(name))
    if raw is None:
        return None
    try:
        rec = json.loads(text_of(raw))
    except ValueError:
        return {"run": "?"}
    return rec if isinstance(rec, dict) else {"run": "?"}


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def key_pattern(name: str) -> str:
    """The SCAN pattern of the keys under ``name``'s prefix (``<name>:*``)."""
    return f"{_glob_escape(name)}:*"


def drop_everything(client: Any, name: str) -> None:
    import redis

    try:
        client.execute_command("FT.DROPINDEX", name, "DD")
    except redis.ResponseError as exc:
        if not index_missing(exc):
            raise
    batch = list(client.scan_iter(match=key_pattern(name), count=1000))
    for i in range(0, len(batch), 1000):
        client.delete(*batch[i: i + 1000])
    client.delete(written_key(name), marker_key(name))


def drop_recorded(client: Any, name: str) -> int:
    """Drop the index ``name`` without its documents, then only the keys its run recorded
    writing (:func:`written_key`), the record and the marker; the number of keys deleted."""
    import redis

    try:
        client.execute_command("FT.DROPINDEX", name)  # no DD: documents are deleted by name
    except redis.ResponseError as exc:
        if not index_missing(exc):
            raise
    deleted, batch = 0, []
    for key in client.sscan_iter(written_key(name), count=1000):
        batch.append(key)
        if len(batch) == 1000:
            deleted += int(client.delete(*batch))
            batch = []
    if batch:
        deleted += int(client.delete(*batch))
    client.delete(written_key(name), marker_key(name))
    return deleted


@dataclass(frozen=True)
class Leftover:
    """One rwb-marked index in Redis (a semantic cache or a vector index of backend ``redis``):
    its name, the marker record, how many keys are under its prefix, and whether its run still
    has a connection (``alive``)."""

    name: str
    record: dict[str, Any]
    keys: int
    index: bool
    alive: bool

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "redis-index", "name": self.name, "keys": self.keys,
                "index": self.index, "alive": self.alive, **{
                    k: self.record.get(k) for k in ("run", "host", "pid", "created", "what")}}


def _live_runs(client: Any) -> set[str]:
    names = set()
    for c in client.client_list():
        n = text_of(c.get("name", ""))
        if n.startswith(CLIENT_PREFIX):
            names.add(n[len(CLIENT_PREFIX):])
    return names


def leftovers(client: Any) -> list[Leftover]:
    """Every rwb-marked index in this Redis (live runs' too, ``alive=True``); indexes and keys
    without rwb's marker are never listed."""
    live = _live_runs(client)
    out = []
    for raw in client.scan_iter(match=_glob_escape(MARKER_PREFIX) + "*", count=1000):
        name = text_of(raw)[len(MARKER_PREFIX):]
        rec = read_marker(client, name) or {}
        keys = sum(1 for _ in client.scan_iter(match=key_pattern(name), count=1000))
        out.append(Leftover(name, rec, keys, index_exists(client, name),
                            str(rec.get("run")) in live))
    return sorted(out, key=lambda lo: lo.name)


def remove_leftover(client: Any, item: Leftover) -> None:
    """Drop a leftover when its marker is unchanged: a semantic cache's index and only the keys
    its run recorded writing (keys an application wrote under the name survive, and are said
    in the log); a vector index of backend ``redis``: the index and the keys under its prefix."""
    if read_marker(client, item.name) != item.record:
        raise ConfigError(f"semantic cache '{item.name}': its rwb marker changed meanwhile; "
                          f"not removed")
    if item.record.get("what") != "semantic cache":
        drop_everything(client, item.name)
        return
    deleted = drop_recorded(client, item.name)
    if deleted != item.keys:
        log.warning("semantic cache '%s': %d keys under '%s:' when listed, %d recorded by the "
                    "killed run and deleted; the others were not written by it and are kept",
                    item.name, item.keys, item.name, deleted)


def collect_leftovers(url: str, remove: bool) -> list[dict[str, Any]]:
    """``rwb services cleanup`` on the Redis at ``url``: every rwb-marked index (vector indexes
    and semantic caches) as a row; with ``remove``, those whose run is gone are dropped."""
    from retrieval.engines.redis.index import connect

    client = connect(url, 5.0)
    try:
        out = []
        for item in leftovers(client):
            row = item.to_dict()
            row["removed"] = False
            if remove and not item.alive:
                remove_leftover(client, item)
                row["removed"] = True
            out.append(row)
        return out
    finally:
        client.close()


__all__ = ["CLIENT_PREFIX", "MARKER_PREFIX", "WRITTEN_PREFIX", "Leftover", "client_name",
           "collect_leftovers", "drop_everything", "drop_recorded", "index_exists",
           "index_missing", "key_pattern", "leftovers",
           "marker_key", "marker_record", "marker_run", "new_run_id", "read_marker",
           "remove_leftover", "set_marker", "text_of", "written_key"]
