"""What the CLI prints after a run, registered per view and workload shape.

A view is a run kind (what its verb prints when the run is done: ``eval``, ``sweep``, ...) or
another view of a finished run (``pareto``). A module of :mod:`retrieval.cli` decorates its
printer with :func:`prints` (``@prints("sweep", "scale")``); a printer registered without a shape
prints every shape of its view that has none of its own. The shape is the summary's ``workload``
(:func:`retrieval.runs.workload_kind`). Discovery imports every module of :mod:`retrieval.cli`
once, so adding a kind never edits a list here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

#: ``fn(summary, where, as_json)``: print ``summary`` (plain data) of the run at ``where`` (its
#: directory, as given); ``as_json``: the view's JSON instead of its text
Printer = Callable[[dict[str, Any], str, bool], None]

#: ``fn(summary)``: the exit status of ``--strict`` for ``summary`` (0: every check passed; 1:
#: one failed, said on stderr, one line each)
StrictCheck = Callable[[dict[str, Any]], int]

_PRINTERS: dict[tuple[str, str | None], Printer] = {}
_STRICT: dict[tuple[str, str | None], StrictCheck] = {}
_DISCOVERED = False


def prints(view: str, *shapes: str) -> Callable[[Printer], Printer]:
    """Decorator: ``fn`` prints ``view`` (a run kind or ``pareto``) for runs of ``shapes``
    (none: every shape without a printer of its own)."""

    def deco(fn: Printer) -> Printer:
        for shape in shapes or (None,):
            old = _PRINTERS.get((view, shape))
            if old is not None and old is not fn:
                raise ValueError(f"printer of ({view}, {shape}) registered twice")
            _PRINTERS[(view, shape)] = fn
        return fn

    return deco


def strict_checks(view: str, *shapes: str) -> Callable[[StrictCheck], StrictCheck]:
    """Decorator: ``fn`` is ``--strict``'s check of ``view`` runs of ``shapes`` (none: every
    shape without a check of its own)."""

    def deco(fn: StrictCheck) -> StrictCheck:
        for shape in shapes or (None,):
            old = _STRICT.get((view, shape))
            if old is not None and old is not fn:
                raise ValueError(f"strict check of ({view}, {shape}) registered twice")
            _STRICT[(view, shape)] = fn
        return fn

    return deco


def strict_exit(view: str, summary: dict[str, Any]) -> int:
    """``--strict``'s exit status for ``summary`` from the check of ``view`` and the summary's
    workload shape (0 when none is registered)."""
    from retrieval.runs import workload_kind

    _discover()
    shape = workload_kind(summary)
    fn = _STRICT.get((view, shape)) or _STRICT.get((view, None))
    return fn(summary) if fn is not None else 0


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    import retrieval.cli as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{mod.name}")
    _DISCOVERED = True


def print_run(view: str, summary: dict[str, Any], where: str, *, as_json: bool = False) -> None:
    """Print ``summary`` through the printer of ``view`` and the summary's workload shape."""
    from retrieval.runs import workload_kind

    _discover()
    shape = workload_kind(summary)
    fn = _PRINTERS.get((view, shape)) or _PRINTERS.get((view, None))
    if fn is None:
        raise LookupError(f"no printer of '{view}' runs (workload {shape})")
    fn(summary, where, as_json)


__all__ = ["Printer", "StrictCheck", "print_run", "prints", "strict_checks", "strict_exit"]
