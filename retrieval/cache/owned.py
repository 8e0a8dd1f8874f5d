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
from typing import Any

from retrieval.engines.redis.owned import (
    Leftover,
    client_name,
    key_pattern,
    leftovers,
    marker_key,
    marker_record,
    new_run_id,
    remove_leftover,
    written_key,
)
from retrieval.engines.redis.owned import drop_everything as _drop_everything
from retrieval.engines.redis.owned import index_exists as _index_exists
from retrieval.engines.redis.owned import read_marker as _marker
from retrieval.engines.redis.owned import text_of as _text
from retrieval.errors import ConfigError

log = logging.getLogger(__name__)


def _first_key(client: Any, pattern: str) -> str | None:
    for key in client.scan_iter(match=pattern, count=1000):
        return _text(key)
    return None


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


__all__ = ["Leftover", "check_free", "claim", "client_name", "drop_owned", "key_pattern",
           "leftovers",
           "marker_key", "new_run_id", "owns", "release", "remove_leftover", "written_key"]
