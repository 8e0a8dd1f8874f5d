"""rwb's marker on what it creates in a Redis it does not own (the vector indexes of backend
``redis`` here; the semantic caches in :mod:`retrieval.cache.owned`, which uses the same
marker), so that ``rwb services cleanup`` can list and remove what a killed run left, and
nothing else.

Marker: a key ``{rwb}owned:<name>`` written with ``SET NX`` before the index ``<name>`` is
created, holding a JSON record (run id, index, key prefix ``<name>:``, host, pid, created,
what). Liveness: the run's connections carry the name ``rwb-<run id>`` (``CLIENT SETNAME``);
a marker whose run has no connection left was left by a killed run. Names never contain ``{``,
so no index prefix covers a marker.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from typing import Any

MARKER_PREFIX = "{rwb}owned:"
CLIENT_PREFIX = "rwb-"


def marker_key(name: str) -> str:
    return f"{MARKER_PREFIX}{name}"


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


__all__ = ["CLIENT_PREFIX", "MARKER_PREFIX", "client_name", "marker_key", "marker_record",
           "marker_run", "new_run_id", "set_marker"]
