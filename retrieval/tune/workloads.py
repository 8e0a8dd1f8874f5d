"""The workload-kind registry of ``rwb sweep``: one registered definition per workload kind.

A workload kind (``plain``, ``filtered``, ``scale``, ``tenants``, ``topology``, ``cold``, or one
a plugin adds) is declared by a :class:`WorkloadKindDef`, registered with
:func:`register_workload` from ONE module: the built-in kinds from the modules of
:mod:`retrieval.tune.kinds` (one each), a third party's from an ``rwb.workload_kinds`` entry
point, a test's from the test itself. The definition carries the kind's hooks:

- ``declared(spec)``: whether a spec asks for this kind (its section: ``filters:``,
  ``scale:``, ...; a registered kind without a section of its own is named by the spec's
  ``workload: NAME``);
- ``plan(spec, request)``: the kind's checks of the spec and command line, one line each,
  before any run folder exists; for a kind measured through the Optuna study (``study`` None) it
  returns the sweep's units of work;
- ``study(spec, run, ds, ref, progress, started)``: measure and summarise a kind studied without
  an Optuna study into the run directory; returns the summary (plain data, summary.json);
- ``units(summary)``: what the result counts as its units of work (builds, layouts, ...);
- ``resumable(spec)``: whether a non-empty ``--out`` holds a killed run of this kind that the
  same command may run again there (None: never);
- for a kind measured through the Optuna study: ``bind(spec, ds, ev)``, the workload its
  Measurer measures (None: plain queries); ``summarise(spec, ds, split, book, plan, workload,
  run_id=, storage=, study_name=)``, summary.json from the study; ``table_row(row)``, a summary
  row as trials.parquet holds it; ``checks_derived``: whether ``tune.build_search: derived``
  builds and checks the answer's derived build;
- ``eval_work(spec, ds, ev)``: what ``rwb eval``'s one body measures per config for this kind
  (``measure`` / ``write_tables`` / ``summary``: :class:`EvalWork`); None: ``rwb eval`` refuses
  the spec with ``no_eval`` (one line; default: "is measured by rwb sweep").

The sweep looks the spec's kind up (:func:`workload_of`) and runs its hooks; it tells no kind
apart by name. The printers (``retrieval.cli.printers``) and the report's renderers
(:mod:`retrieval.reporting.registry`) of a kind are keyed by the same name (the summary's
``workload``) in their own layers' registries.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from retrieval.errors import ConfigError, unknown_name_error

if TYPE_CHECKING:
    from retrieval.data import VectorDataset
    from retrieval.runs import RunDir

#: a :class:`retrieval.tune.spec.SweepSpec` (not imported: the spec module checks a spec's
#: ``workload`` name here, and the siblings of retrieval.tune import no cycle)
SweepSpec = Any
#: a :class:`retrieval.tune.units.Unit` (likewise)
Unit = Any

log = logging.getLogger(__name__)

#: the entry-point group of third-party workload kinds (a module calling register_workload)
ENTRY_POINT_GROUP = "rwb.workload_kinds"
#: the package whose modules define the built-in workload kinds (one module each)
KINDS_PACKAGE = "retrieval.tune.kinds"

#: progress callback: (steps done, steps known, description)
Progress = Callable[[int, int, str], None]
#: ``fn(spec, run, ds, ref, progress, started)``: measure and summarise into ``run``
StudyFn = Callable[[SweepSpec, "RunDir", "VectorDataset", Any, "Progress | None", float],
                   dict[str, Any]]


class EvalWork(Protocol):
    """What ``rwb eval`` measures per build x search config of one workload kind."""

    measurements: list[Any]

    def measure(self, built: Any, config: Any, label: str, *, first: bool) -> None: ...

    def write_tables(self, run: RunDir) -> None: ...

    def summary(self) -> dict[str, Any]: ...


#: ``fn(spec, ds, ev)``: the eval body's measurement of one kind (ev: an Evaluator)
EvalWorkFn = Callable[[SweepSpec, "VectorDataset", Any], EvalWork]


@dataclass(frozen=True)
class SweepRequest:
    """What the command line asked beside the spec: ``executor`` (``local`` / ``ray``), the
    Optuna ``storage`` URL and ``study`` name (None when not given)."""

    executor: str = "local"
    storage: str | None = None
    study: str | None = None


def _no_units(summary: Mapping[str, Any]) -> int:
    return 0


@dataclass(frozen=True)
class WorkloadKindDef:
    """One workload kind of ``rwb sweep`` (see the module's docstring for the hooks).

    ``name``: the summary's ``workload`` value; ``rank``: the order in which kinds are asked
    whether a spec declares them (lower first; the first that does runs it, and its ``plan``
    refuses the sections it cannot combine with); ``section``: the spec field that declares it
    (messages name it; None: ``workload: NAME``)."""

    name: str
    declared: Callable[[SweepSpec], bool]
    plan: Callable[[SweepSpec, SweepRequest], list[Unit] | None]
    study: StudyFn | None = None
    units: Callable[[Mapping[str, Any]], int] = _no_units
    resumable: Callable[[SweepSpec], Callable[[Path], bool]] | None = None
    section: str | None = None
    rank: int = 100
    eval_work: EvalWorkFn | None = None
    no_eval: str = ""
    bind: Callable[[SweepSpec, VectorDataset, Any], Any] | None = None
    summarise: Callable[..., dict[str, Any]] | None = None
    table_row: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    checks_derived: bool = False


_KINDS: dict[str, WorkloadKindDef] = {}
_DISCOVERED = False


def register_workload(kind: WorkloadKindDef) -> WorkloadKindDef:
    """Register ``kind`` (twice under one name with another definition is an error, unless it
    comes from the same module: a module imported again)."""
    old = _KINDS.get(kind.name)
    if old is not None and old != kind and _origin(old) != _origin(kind):
        raise ValueError(f"workload kind '{kind.name}' registered twice")
    _KINDS[kind.name] = kind
    return kind


def _origin(kind: WorkloadKindDef) -> str:
    return str(getattr(kind.plan, "__module__", ""))


_DISCOVERING = False


def _discover() -> None:
    """Import every module of :data:`KINDS_PACKAGE` (a built-in kind that fails to import is
    an error, raised again at the next lookup) and every ``rwb.workload_kinds`` entry point
    (a broken plugin is logged and skipped), once."""
    global _DISCOVERED, _DISCOVERING
    if _DISCOVERED or _DISCOVERING:
        return
    _DISCOVERING = True
    try:
        pkg = importlib.import_module(KINDS_PACKAGE)
        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()
            except Exception as exc:  # a broken plugin must not break rwb
                log.warning("workload kind plugin '%s' failed to load: %s", ep.name, exc)
        _DISCOVERED = True
    finally:
        _DISCOVERING = False


def workload_kinds() -> dict[str, WorkloadKindDef]:
    """Every registered workload kind, in the order a spec is matched against them."""
    _discover()
    return {k.name: k for k in sorted(_KINDS.values(), key=lambda k: (k.rank, k.name))}


def named_kinds() -> tuple[str, ...]:
    """The kinds a spec may name with ``workload: NAME`` (those without a section of their
    own)."""
    return tuple(n for n, k in workload_kinds().items() if k.section is None)


def workload_of(spec: SweepSpec) -> WorkloadKindDef:
    """The workload kind ``spec`` declares: ``workload: NAME`` when given (a registered kind
    without a section; ConfigError naming the allowed ones otherwise), else the first kind in
    rank order whose section the spec has."""
    kinds = workload_kinds()
    named = spec.workload
    if named is not None:
        kind = kinds.get(named)
        if kind is None or kind.section is not None:
            raise unknown_name_error("workload", named, named_kinds() or ("(none registered)",),
                                     where=spec.source)
        return kind
    for kind in kinds.values():
        if kind.declared(spec):
            return kind
    raise ConfigError(f"{spec.source}: no workload kind runs this spec")  # plain always does


def eval_work_of(spec: SweepSpec) -> EvalWorkFn:
    """The eval body's measurement of ``spec``'s workload kind; ConfigError (one line) when
    ``rwb eval`` does not measure that kind."""
    kind = workload_of(spec)
    if kind.eval_work is None:
        raise ConfigError(f"{spec.source}: " + (kind.no_eval or (
            f"a spec with '{kind.section or kind.name}' is measured by rwb sweep, not rwb "
            f"eval")))
    return kind.eval_work


def require_workload(summary: Mapping[str, Any], kind: WorkloadKindDef, field: str,
                     path: Path | str) -> None:
    """Refuse, in one line naming ``field``, the summary of a run (the folder ``path``) that is
    not a run of the workload kind ``kind`` (its summary's ``workload``)."""
    got = summary.get("workload")
    if got != kind.name:
        raise ConfigError(f"field '{field}': '{path}' must be a {kind.name} run (workload "
                          f"'{kind.name}'); received workload '{got}'")


def check_not_resumable(spec: SweepSpec, kind: WorkloadKindDef, request: SweepRequest) -> None:
    """A kind studied without an Optuna study refuses ``--storage`` / ``--study``."""
    if request.storage is not None or request.study is not None:
        raise ConfigError(f"{spec.source}: a spec with '{kind.section or kind.name}' is studied "
                          f"without an Optuna study (not resumable): drop --storage / --study")


def check_local(spec: SweepSpec, kind: WorkloadKindDef, request: SweepRequest) -> None:
    """A kind that runs in this process only refuses ``--executor`` other than local."""
    if request.executor != "local":
        raise ConfigError(f"{spec.source}: a spec with '{kind.section or kind.name}' runs in "
                          f"this process (--executor local); received {request.executor}")


__all__ = [
    "ENTRY_POINT_GROUP",
    "EvalWork",
    "SweepRequest",
    "WorkloadKindDef",
    "check_local",
    "check_not_resumable",
    "eval_work_of",
    "named_kinds",
    "register_workload",
    "require_workload",
    "workload_kinds",
    "workload_of",
]
