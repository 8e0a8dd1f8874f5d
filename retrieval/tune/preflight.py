"""Services a spec needs, checked before any work (issue 34): a pgvector entry with no reachable
PostgreSQL fails in seconds (exit 3, "not measurable here"), before the data is embedded or any
other backend is built. An engine whose server module has ``check_reachable()`` is asked once."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable

from retrieval.indexes.engine import engine_of_backend

log = logging.getLogger(__name__)

#: seconds each server gets to answer
CHECK_TIMEOUT_S = 5.0


def check_services(backends: Iterable[str], *, where: str,
                   timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Ask every engine of ``backends`` with a server check whether its server answers;
    NotReachable (one line naming the backend and ``where``) from the first that does not."""
    asked: set[str] = set()
    for backend in backends:
        desc = engine_of_backend(backend)
        if desc is None or desc.server is None or desc.name in asked:
            continue
        asked.add(desc.name)
        try:
            module = importlib.import_module(desc.server)
        except ImportError:  # the engine's own install hint comes when it is built
            continue
        check = getattr(module, "check_reachable", None)
        if callable(check):
            log.info("%s: checking the %s server before any work", where, desc.name)
            check(timeout_s=timeout_s, where=f"{where}: backend '{backend}'")


__all__ = ["CHECK_TIMEOUT_S", "check_services"]
