"""The report's "measured or translated" table: for each chosen config of a sweep, every engine
``rwb export`` can actually write it for (the engine's translator accepts it), and whether that
export would carry figures measured on the engine's own library (``measured_on`` is one of its
backends) or a translation measured on another one."""

from __future__ import annotations

from typing import Any

from retrieval.errors import ConfigError
from retrieval.exporting.engines import ANN_ENGINES, own_backends, translate
from retrieval.exporting.files import full_search
from retrieval.exporting.portable import portable
from retrieval.reporting.html import Table
from retrieval.reporting.style import params_text


def exportable(c: dict[str, Any], engine: str, metric: str, dim: int, k: int) -> bool:
    """Whether ``rwb export`` can write chosen point ``c`` for ``engine``: the backend has an
    export mapping and the engine's translator takes it (ConfigError = impossible)."""
    backend = str(c.get("backend"))
    try:
        p = portable(backend, c.get("build_params") or c.get("build") or {},
                     full_search(backend, c.get("search") or {}))
        translate(engine, p, metric, dim, k)
    except ConfigError:
        return False
    return True


def exports_table(chosen: list[dict[str, Any]], *, metric: str, dim: int,
                  k: int) -> Table | None:
    """One row per (chosen config, engine that can take it); None when there is none."""
    rows: list[list[Any]] = []
    hl: list[bool] = []
    for c in chosen:
        backend = str(c.get("backend"))
        for engine in ANN_ENGINES:
            if not exportable(c, engine, metric, dim, k):
                continue
            own = backend in own_backends(engine)
            rows.append([c.get("label") or backend, params_text(c.get("search")), engine,
                         backend, "measured" if own else f"translated (measured on {backend})"])
            hl.append(own)
    if not rows:
        return None
    return Table(["chosen", "search", "engine", "measured_on", "evidence"], rows, hl,
                 caption="Only the exports rwb export ENGINE can write (the engine's translator "
                         "accepts the config). rwb export writes evidence.measured_on; a "
                         "translated export was never run on that engine: measure it there with "
                         "rwb verify FILE --engine ENGINE, or sweep that engine's backend.")


__all__ = ["exportable", "exports_table"]
