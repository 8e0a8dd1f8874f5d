"""The report's "measured or translated" table: for each chosen config of a sweep, every engine
rwb exports to, and whether an export would carry figures measured on that engine's own library
(``measured_on`` is one of its backends) or a translation measured on another one."""

from __future__ import annotations

from typing import Any

from retrieval.exporting.engines import ANN_ENGINES, own_backends
from retrieval.reporting.html import Table
from retrieval.reporting.style import params_text


def exports_table(chosen: list[dict[str, Any]]) -> Table | None:
    """One row per (chosen config, engine); None when nothing was chosen."""
    if not chosen:
        return None
    rows: list[list[Any]] = []
    hl: list[bool] = []
    for c in chosen:
        backend = str(c.get("backend"))
        for engine in ANN_ENGINES:
            own = backend in own_backends(engine)
            rows.append([c.get("label") or backend, params_text(c.get("search")), engine,
                         backend, "measured" if own else f"translated (measured on {backend})"])
            hl.append(own)
    return Table(["chosen", "search", "engine", "measured_on", "evidence"], rows, hl,
                 caption="rwb export ENGINE writes evidence.measured_on; a translated export was "
                         "never run on that engine: measure it there with rwb verify FILE "
                         "--engine ENGINE, or sweep that engine's backend.")


__all__ = ["exports_table"]
