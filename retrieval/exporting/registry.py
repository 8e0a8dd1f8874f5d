"""Exporters and verifiers register themselves, as index backends do.

An exporter is keyed by (run kind, workload shape, engine) (the shape: the summary's ``workload``;
an exporter registered without one takes every shape of its kind without its own): the ANN
exporters take sweep runs (plain and filtered) for every ANN engine, the redisvl exporter
cache-tune runs for ``redisvl``, the rerank exporter rerank-sweep runs for ``rerank``. A verifier
is keyed by the ``kind`` field of the file an exporter wrote (and, for a file whose kind is wrong,
by its ``engine``). Discovery imports every module of :mod:`retrieval.exporting` once; a module
registers at import with :func:`register_exporter` / :func:`register_verifier`.

The registry also explains a miss in each exporter's own words: a *dedicated* exporter (its engines
take only its run kind) says which engine its runs need, or which runs its engine takes; the
*default* exporter (ANN) says that a run of another kind has nothing to export.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from retrieval.errors import ConfigError
from retrieval.runs import RunDir, RunKind, workload_kind


@runtime_checkable
class ExportResult(Protocol):
    """What an exporter returns: ``path`` written, and the record the CLI prints."""

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class VerifyResult(Protocol):
    """What a verifier returns: ``holds`` (the config still meets its target), and the record."""

    @property
    def holds(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class ChecksReport(VerifyResult, Protocol):
    """A verify report made of named checks (``check``, ``measured``, ``expected``, ``passed``)."""

    @property
    def checks(self) -> list[dict[str, Any]]: ...


ExportFn = Callable[[RunDir, str, "Path | str", "str | None"], ExportResult]
VerifyFn = Callable[[Mapping[str, Any], "Path | str"], VerifyResult]


class NothingToExport(ConfigError):
    """The run has no config meeting the target that this engine can take (CLI exit 1)."""


@dataclass(frozen=True)
class Exporter:
    """One exporter: run ``kind`` x ``engines``.

    ``exports``: what ``--engine E`` writes ("a semantic-cache threshold"); ``tuned``: what a run
    of this kind tuned ("a rerank depth"); ``made_by``: the command that makes such runs.
    ``dedicated``: the engines take only this kind (else the exporter is the default one).
    """

    kind: RunKind
    engines: tuple[str, ...]
    export: ExportFn
    exports: str
    tuned: str
    made_by: str
    dedicated: bool = True
    shape: str | None = None

    def wrong_kind(self, run: RunDir, kind: str, engine: str) -> ConfigError:
        if not self.dedicated:
            return NothingToExport(
                f"run '{run.path}' is an rwb '{kind}' run: it has no tuned config; tune it with "
                f"{self.made_by}"
            )
        return ConfigError(
            f"--engine {engine} exports {self.exports} (a run of {self.made_by}); "
            f"run '{run.path}' is a '{kind}' run"
        )

    def wrong_engine(self, run: RunDir, engine: str) -> ConfigError:
        return ConfigError(
            f"run '{run.path}' tuned {self.tuned}: export it with --engine "
            f"{' | '.join(self.engines)}; received --engine {engine}"
        )


@dataclass(frozen=True)
class Verifier:
    file_kind: str
    verify: VerifyFn
    engines: tuple[str, ...] = ()
    default: bool = False


_EXPORTERS: list[Exporter] = []
_BY_KEY: dict[tuple[str, str | None, str], Exporter] = {}
_VERIFIERS: list[Verifier] = []
_DISCOVERED = False


def register_exporter(
    kind: RunKind,
    engines: tuple[str, ...],
    *,
    exports: str,
    tuned: str,
    made_by: str,
    dedicated: bool = True,
    shape: str | None = None,
) -> Callable[[ExportFn], ExportFn]:
    """Decorator: ``fn(run, engine, out, backend)`` exports runs of ``kind`` (of workload
    ``shape``; None: every shape without an exporter of its own) for ``engines``."""

    def deco(fn: ExportFn) -> ExportFn:
        entry = Exporter(kind, tuple(engines), fn, exports, tuned, made_by, dedicated, shape)
        for engine in entry.engines:
            old = _BY_KEY.get((kind, shape, engine))
            if old is not None and old.export is not fn:
                raise ValueError(f"exporter for ({kind}, {shape}, {engine}) registered twice")
            _BY_KEY[(kind, shape, engine)] = entry
        if entry not in _EXPORTERS:
            _EXPORTERS.append(entry)
        return fn

    return deco


def register_verifier(
    file_kind: str, *, engines: tuple[str, ...] = (), default: bool = False
) -> Callable[[VerifyFn], VerifyFn]:
    """Decorator: ``fn(doc, path)`` verifies exported files whose ``kind`` is ``file_kind`` (or
    whose ``engine`` is one of ``engines``); the ``default`` verifier takes every other file and
    names the field it expected."""

    def deco(fn: VerifyFn) -> VerifyFn:
        entry = Verifier(file_kind, fn, tuple(engines), default)
        if entry not in _VERIFIERS:
            _VERIFIERS.append(entry)
        return fn

    return deco


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    import retrieval.exporting as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name != "registry":
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    _DISCOVERED = True


def exporters() -> list[Exporter]:
    """Every registered exporter: dedicated ones in registration order, then the default."""
    _discover()
    return sorted(_EXPORTERS, key=lambda e: not e.dedicated)


def engines() -> tuple[str, ...]:
    """Every engine some exporter writes (default exporter's first)."""
    ordered = sorted(exporters(), key=lambda e: e.dedicated)
    return tuple(dict.fromkeys(engine for e in ordered for engine in e.engines))


def run_shape(run: RunDir) -> str:
    """The workload shape of ``run`` (its summary's ``workload``; plain without a summary)."""
    summary = run.read_json("summary.json") if run.file("summary.json").exists() else {}
    return workload_kind(summary if isinstance(summary, Mapping) else {})


def _default() -> Exporter:
    """The default exporter: the one of index sweeps (ANN) when registered, whatever order the
    modules were imported in; else the first one that is not dedicated."""
    from retrieval.tune.summary import SweepSummary

    shared = [e for e in exporters() if not e.dedicated]
    return next((e for e in shared if e.kind == SweepSummary.KIND), shared[0])


def exporter_for(run: RunDir, kind: str, engine: str) -> Exporter:
    """The exporter of (``kind``, the run's workload shape, ``engine``); else the error that
    explains the miss."""
    _discover()
    found = _BY_KEY.get((kind, run_shape(run), engine)) or _BY_KEY.get((kind, None, engine))
    if found is not None:
        return found
    default = _default()
    for e in exporters():
        if (e.dedicated or e is not default) and kind == e.kind:
            raise e.wrong_engine(run, engine)  # a kind with engines of its own (fusion: ...)
        if e.dedicated and engine in e.engines:
            raise e.wrong_kind(run, kind, engine)
    raise default.wrong_kind(run, kind, engine)


def verifier_for(doc: Mapping[str, Any]) -> Verifier:
    """The verifier of an exported document (by its ``kind``, then its ``engine``)."""
    _discover()
    for v in _VERIFIERS:
        if not v.default and (doc.get("kind") == v.file_kind or doc.get("engine") in v.engines):
            return v
    return next(v for v in _VERIFIERS if v.default)


__all__ = [
    "ChecksReport",
    "ExportResult",
    "Exporter",
    "NothingToExport",
    "Verifier",
    "VerifyResult",
    "engines",
    "exporter_for",
    "exporters",
    "register_exporter",
    "register_verifier",
    "run_shape",
    "verifier_for",
]
