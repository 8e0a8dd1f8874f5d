"""What rwb creates in a Redis it does not own, and may therefore remove: nothing else.

A run that fills a semantic cache (``rwb tune cache``, its transfer check, ``rwb verify`` of a
cache export, a cache load target) claims its name first: a marker key ``{rwb}owned:<name>``
written with ``SET NX`` (a JSON record: run id, index, key prefix, host, pid, created). The
claim is refused, in one line naming it, when the index ``<name>`` or any key under the prefix
``<name>:`` already exists (a user's redisvl ``llmcache``, a key ``doc:1``), or when another
marker holds the name. At the end the run drops the index and the prefix's keys only while the
marker still names its run, then the marker.

A run's client connections carry the name ``rwb-<run id>`` (``CLIENT SETNAME``), so a marker
whose run has no connection left was left by a run that was killed: :func:`leftovers` lists
them and :func:`remove_leftover` drops them (``rwb services cleanup``). Names never contain
``{``, so no cache prefix covers a marker. The vector indexes of backend ``redis`` carry the
same marker (:mod:`retrieval.engines.redis.owned`), so they are listed and removed alike.

A semantic cache's run also records every key it writes in the set ``{rwb}written:<name>``
(:func:`written_key`, in the same pipeline as the write), so :func:`remove_leftover` deletes
only those keys (the index is dropped without its documents): a key an application wrote under
a killed run's leftover name survives ``rwb services cleanup --yes``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from retrieval.engines.redis.owned import (
    CLIENT_PREFIX,
    MARKER_PREFIX,
    client_name,
    marker_key,
    marker_record,
    new_run_id,
)
from retrieval.errors import ConfigError

log = logging.getLogger(__name__)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _index_exists(client: Any, name: str) -> bool:
    return name in {_text(n) for n in client.execute_command("FT._LIST")}


def _first_key(client: Any, pattern: str) -> str | None:
    for key in client.scan_iter(match=pattern, count=1000):
        return _text(key)
    return None


def _marker(client: Any, name: str) -> dict[str, Any] | None:
    raw = client.get(marker_key(name))
    if raw is None:
        return None
    try:
        rec = json.loads(_text(raw))
    except ValueError:
        return {"run": "?"}
    return rec if isinstance(rec, dict) else {"run": "?"}


#: the set of the keys a semantic cache's run wrote (see the module doc)
WRITTEN_PREFIX = "{rwb}written:"


def written_key(name: str) -> str:
    """The Redis set recording the keys the run that owns ``name`` wrote."""
    return f"{WRITTEN_PREFIX}{name}"


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def key_pattern(name: str) -> str:
    """The SCAN pattern of the keys under ``name``'s prefix (``<name>:*``)."""
    return f"{_glob_escape(name)}:*"


def check_free(client: Any, name: str, url: str, *, what: str) -> None:
    """ConfigError (one line naming the index or key and the URL) when the index ``name``, a
    key under ``<name>:`` or an rwb marker of ``name`` exists in this Redis."""
    cleanup = "; `rwb services cleanup` lists and removes what killed rwb runs left"
    held = _marker(client, name)
    if held is not None:
        raise ConfigError(
            f"{what}: Redis at {url} already holds an rwb marker for the name '{name}' (run "
            f"{held.get('run')}, {held.get('host', '?')} pid {held.get('pid', '?')}, created "
            f"{held.get('created', '?')}): another rwb run uses it or was killed; set "
            f"cache.name to another name{cleanup}")
    if _index_exists(client, name):
        raise ConfigError(
            f"{what}: Redis at {url} already has an index '{name}' that this rwb run did not "
            f"create; rwb never drops it: set cache.name to a name that is not in use")
    found = _first_key(client, key_pattern(name))
    if found is not None:
        raise ConfigError(
            f"{what}: Redis at {url} already has keys under the prefix '{name}:' (e.g. "
            f"'{found}') that this rwb run did not create; rwb never deletes them: set "
            f"cache.name to a name that is not in use")


def claim(client: Any, name: str, url: str, run_id: str, *, what: str) -> None:
    """Claim ``name`` for run ``run_id`` (see the module doc); ConfigError (one line naming the
    index or key and the URL) when anything of that name exists already."""
    check_free(client, name, url, what=what)
    record = marker_record(name, run_id, what)
    if not client.set(marker_key(name), json.dumps(record), nx=True):
        raise ConfigError(f"{what}: Redis at {url}: another rwb run claimed the name '{name}' "
                          f"just now; set cache.name to another name")
    found = _first_key(client, key_pattern(name))  # written between the check and the claim
    if found is not None or _index_exists(client, name):
        release(client, name, run_id)
        raise ConfigError(f"{what}: Redis at {url}: '{name}' came into use while rwb claimed "
                          f"it; set cache.name to a name that is not in use")


def owns(client: Any, name: str, run_id: str) -> bool:
    held = _marker(client, name)
    return held is not None and held.get("run") == run_id


def release(client: Any, name: str, run_id: str) -> None:
    """Delete the marker of ``name`` when it is still this run's."""
    if owns(client, name, run_id):
        client.delete(marker_key(name))


def drop_owned(client: Any, name: str, run_id: str, *, recreated: bool = False) -> bool:
    """Drop the index ``name``, the keys under its prefix and the marker, when the marker
    names ``run_id``; False (nothing touched) when it does not. A marker that is gone while
    the index is gone too (or was re-created by this run: ``recreated``) means the server
    restarted empty: what is under the prefix was written by this run, which claims the name
    again and drops it; an index someone else created meanwhile is left alone."""
    if not owns(client, name, run_id):
        record = json.dumps(marker_record(name, run_id, "semantic cache"))
        lost = _marker(client, name) is None and (recreated or not _index_exists(client, name))
        if lost and client.set(marker_key(name), record, nx=True):
            # only this run deletes its marker: gone means the server restarted empty, so what
            # is under the prefix now was written by this run after the restart (claimed again)
            log.info("semantic cache '%s': the server lost rwb's marker (restarted empty); "
                     "dropping what this run wrote since", name)
            _drop_everything(client, name)
            return True
        log.warning("semantic cache '%s': not dropped, its rwb marker is gone or names another "
                    "run", name)
        return False
    _drop_everything(client, name)
    return True


def _drop_everything(client: Any, name: str) -> None:
    import redis

    from retrieval.cache.redis import index_missing

    try:
        client.execute_command("FT.DROPINDEX", name, "DD")
    except redis.ResponseError as exc:
        if not index_missing(exc):
            raise
    batch = list(client.scan_iter(match=key_pattern(name), count=1000))
    for i in range(0, len(batch), 1000):
        client.delete(*batch[i: i + 1000])
    client.delete(written_key(name), marker_key(name))


def _drop_recorded(client: Any, name: str) -> int:
    """Drop the index ``name`` without its documents, then only the keys its run recorded
    writing (:func:`written_key`), the record and the marker; the number of keys deleted."""
    import redis

    from retrieval.cache.redis import index_missing

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
        n = _text(c.get("name", ""))
        if n.startswith(CLIENT_PREFIX):
            names.add(n[len(CLIENT_PREFIX):])
    return names


def leftovers(client: Any) -> list[Leftover]:
    """Every rwb-marked index in this Redis (live runs' too, ``alive=True``); indexes and keys
    without rwb's marker are never listed."""
    live = _live_runs(client)
    out = []
    for raw in client.scan_iter(match=_glob_escape(MARKER_PREFIX) + "*", count=1000):
        name = _text(raw)[len(MARKER_PREFIX):]
        rec = _marker(client, name) or {}
        keys = sum(1 for _ in client.scan_iter(match=key_pattern(name), count=1000))
        out.append(Leftover(name, rec, keys, _index_exists(client, name),
                            str(rec.get("run")) in live))
    return sorted(out, key=lambda lo: lo.name)


def remove_leftover(client: Any, item: Leftover) -> None:
    """Drop a leftover when its marker is unchanged: a semantic cache's index and only the keys
    its run recorded writing (keys an application wrote under the name survive, and are said
    in the log); a vector index of backend ``redis``: the index and the keys under its prefix."""
    if _marker(client, item.name) != item.record:
        raise ConfigError(f"semantic cache '{item.name}': its rwb marker changed meanwhile; "
                          f"not removed")
    if item.record.get("what") != "semantic cache":
        _drop_everything(client, item.name)
        return
    deleted = _drop_recorded(client, item.name)
    if deleted != item.keys:
        log.warning("semantic cache '%s': %d keys under '%s:' when listed, %d recorded by the "
                    "killed run and deleted; the others were not written by it and are kept",
                    item.name, item.keys, item.name, deleted)


__all__ = ["Leftover", "check_free", "claim", "client_name", "drop_owned", "key_pattern",
           "leftovers",
           "marker_key", "new_run_id", "owns", "release", "remove_leftover", "written_key"]
