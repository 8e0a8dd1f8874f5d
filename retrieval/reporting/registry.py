"""The report's renderers, registered per run kind and workload shape.

A renderer module (one per run kind, in :mod:`retrieval.reporting.kinds`) decorates the function
that draws a run's figures with :func:`renders_figures` and the one that lays out its tables with
:func:`renders_tables`, keyed by the kind (``KIND`` of its summary model) and, where a kind's
runs come in several shapes, the workload shape (``workload`` of the summary, read by
:func:`retrieval.runs.workload_kind`): ``plain``, ``filtered``, ``scale``, .... A renderer
registered without a shape takes every shape of its kind that has none of its own. Discovery
imports every module of :mod:`retrieval.reporting.kinds` once, so adding a kind never edits a
list here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import TypeVar

from matplotlib.figure import Figure

from retrieval.errors import ConfigError
from retrieval.reporting.html import Table
from retrieval.reporting.load import Run
from retrieval.runs import workload_kind

Figures = list[tuple[str, str, Figure, str]]  # (name, title, figure, caption)
Tables = list[tuple[str, Table]]  # (heading, table)
#: ``fn(run, remeasure)``: the figures of a run (``remeasure``: recompute what is not stored)
FiguresFn = Callable[[Run, bool], Figures]
#: ``fn(run)``: the tables of a run
TablesFn = Callable[[Run], Tables]
F = TypeVar("F", FiguresFn, TablesFn)

#: the package whose modules are the renderers (one per run kind / workload shape)
KINDS_PACKAGE = "retrieval.reporting.kinds"

_FIGURES: dict[tuple[str, str | None], FiguresFn] = {}
_TABLES: dict[tuple[str, str | None], TablesFn] = {}
_DISCOVERED = False


def _register(table: dict[tuple[str, str | None], F], what: str, kind: str,
              shapes: tuple[str, ...]) -> Callable[[F], F]:
    def deco(fn: F) -> F:
        for shape in shapes or (None,):
            key = (str(kind), shape)
            old = table.get(key)
            if old is not None and old is not fn:
                raise ValueError(f"{what} of ({kind}, {shape}) registered twice")
            table[key] = fn
        return fn

    return deco


def renders_figures(kind: str, *shapes: str) -> Callable[[FiguresFn], FiguresFn]:
    """Decorator: ``fn(run, remeasure)`` draws the figures of ``kind`` runs (of ``shapes``;
    none: every shape without its own renderer)."""
    return _register(_FIGURES, "figures", kind, shapes)


def renders_tables(kind: str, *shapes: str) -> Callable[[TablesFn], TablesFn]:
    """Decorator: ``fn(run)`` lays out the tables of ``kind`` runs (of ``shapes``; none: every
    shape without its own renderer)."""
    return _register(_TABLES, "tables", kind, shapes)


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    pkg = importlib.import_module(KINDS_PACKAGE)  # by name: this contract imports no kind
    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{mod.name}")
    _DISCOVERED = True


def _lookup(table: dict[tuple[str, str | None], F], run: Run) -> F | None:
    _discover()
    shape = workload_kind(run.summary)
    return table.get((str(run.kind), shape)) or table.get((str(run.kind), None))


def figures_of(run: Run, *, remeasure: bool = False) -> Figures:
    """The figures of ``run`` from its kind's (and shape's) renderer; ConfigError when its kind
    has none."""
    fn = _lookup(_FIGURES, run)
    if fn is None:
        raise ConfigError(f"no figures for run kind '{run.kind}'")
    return fn(run, remeasure)


def tables_of(run: Run) -> Tables | None:
    """The tables of ``run`` from its kind's (and shape's) renderer; None when it has none."""
    fn = _lookup(_TABLES, run)
    return fn(run) if fn is not None else None


__all__ = ["Figures", "FiguresFn", "Tables", "TablesFn", "figures_of", "renders_figures",
           "renders_tables", "tables_of"]
