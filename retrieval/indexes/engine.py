"""The engine descriptor: everything the rest of rwb knows about an engine, in one object.

Each folder of :mod:`retrieval.engines` (and any third-party package that declares an
``rwb.engines`` entry point) registers ONE :class:`EngineDescriptor` with
:func:`register_engine`; exporters, verify, the tuner, the report and the CLI read engines from
here and never name one. Discovery imports every sub-package of ``retrieval.engines`` (found by
name, so this contract does not import the engines) and then every ``rwb.engines`` entry point:
its value is a module (importing it registers its engine and backends) or an
:class:`EngineDescriptor` object.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import pkgutil
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from retrieval.errors import param_error, unknown_name_error
from retrieval.indexes.hybrid import HybridSearch, SparseFactory
from retrieval.indexes.portable import Inverse, PortableReader, Translator
from retrieval.indexes.servers import LocalService
from retrieval.runs.provenance import track_packages, track_threads

#: a filtered operating point's native extras. Called with the full search params of the
#: engine's own backend and the params as measured (before defaults were filled in), it removes
#: the filter-only knobs that have no neutral form (so the rest translates) and returns a
#: function (native config) -> (native config, extra fields of the exported entry) that adds
#: them back; None when none apply.
#: a private server process of an engine for one run: ``local_server(data_dir, threads=n)`` is a
#: context manager that yields the URI its backends take as ``uri=`` (stopped on exit)
LocalServer = Callable[..., AbstractContextManager[str]]
FilterKnobs = Callable[
    [dict[str, Any], Mapping[str, Any]],
    Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]] | None,
]

log = logging.getLogger(__name__)

#: the package whose sub-packages are the built-in engines
BUILTIN_PACKAGE = "retrieval.engines"
#: the entry-point group of third-party engines
ENTRY_POINT_GROUP = "rwb.engines"

#: the engine's thread settings in force now, for a run's provenance (``threads`` of
#: manifest.json): called with the spec's ``threads`` (None: not known), returns the keys to
#: record (e.g. an OpenMP maximum), {} when the engine's library is not in use
ThreadSettings = Callable[[int | None], dict[str, Any]]


@dataclass(frozen=True)
class Leftovers:
    """What killed rwb runs left on the engine's server, for ``rwb services cleanup``:
    ``env`` names the variable holding the server's URL (``RWB_PG_URL``), ``label`` the server
    in messages (``PostgreSQL``), ``option`` the command-line option that overrides ``env``;
    ``collect(url, remove)`` lists every rwb-marked object there (live runs' too) as rows with
    at least ``kind``, ``name``, ``alive`` and ``removed`` (with ``remove``, the ones whose run
    is gone are dropped first). Objects without rwb's marker are never listed nor touched."""

    env: str
    label: str
    option: str
    collect: Callable[[str, bool], list[dict[str, Any]]]


#: (backend, search params, k) -> the engine's own filtered search call with those params, as a
#: line of text (the ``engine_call`` of a filtered sweep's choices and operating points)
FilterCall = Callable[[str, Mapping[str, Any], int], str]


def filter_call_text(backend: str, search: Mapping[str, Any], k: int) -> str:
    """The engine's filtered search call for ``backend`` (its descriptor's ``filter_call``), or a
    neutral line when the engine has none."""
    desc = engine_of_backend(backend)
    if desc is not None and desc.filter_call is not None:
        return desc.filter_call(backend, search, k)
    return f"{backend} filtered search {dict(search)}"


@dataclass(frozen=True)
class EngineDescriptor:
    """One engine. ``backends``: the rwb backend names its folder registers (the first is the
    source preferred for an export); ``extra``: the pip extra that installs it
    (``retrieval-workbench[extra]``); ``libraries``: distributions whose versions a run
    records; ``knobs``: its search knob names, recall-monotone ones first (``ef``-like, then
    ``nprobe``-like); ``ef_knob``: its HNSW candidate-list knob (a post-filter depth
    raises it); ``to_native`` / ``from_native``: export translation and its inverse (None:
    rwb cannot export to / run that engine); ``portable_reader``: the neutral form of a config of
    an engine rwb cannot run; ``filter_form``: how a filter is written in the engine (export
    text); ``filter_knobs``: see :data:`FilterKnobs`;
    ``entry_search_fields``: fields of an exported filtered entry that hold search params of
    this engine (added back when verify re-measures it); ``server``: the module of its local server
    (``start`` / ``stop``), if it has one; ``local_server``: see :data:`LocalServer`;
    ``service``: its local server for ``rwb services start|stop`` (:class:`LocalService`);
    ``leftovers``: see :class:`Leftovers`; ``thread_settings``: see :data:`ThreadSettings`;
    ``conformance``: the conformance cases of its backends (keyword arguments of
    :class:`retrieval.testing.conformance.ConformanceCase`, ``backend`` included; a backend
    without any is checked with the defaults); ``takes_auto``: whether it accepts a
    let-the-engine-choose (AUTOINDEX) config; ``roles``: (role, backend) pairs this engine
    fills by default (:data:`ROLES`); ``filter_call``: see :data:`FilterCall`; ``attach``: see
    :mod:`retrieval.indexes.live`; ``hybrid``: its own hybrid search (export form and the
    client call that runs it; :class:`~retrieval.indexes.hybrid.HybridSearch`); ``sparse``:
    its sparse vector index holding BM25 weights (a fusion leg; see
    :mod:`retrieval.indexes.hybrid`)."""

    name: str
    backends: tuple[str, ...] = ()
    extra: str | None = None
    libraries: tuple[str, ...] = ()
    knobs: tuple[str, ...] = ()
    ef_knob: str | None = None
    to_native: Translator | None = None
    from_native: Inverse | None = None
    portable_reader: PortableReader | None = None
    filter_form: str | None = None
    filter_knobs: FilterKnobs | None = None
    entry_search_fields: tuple[str, ...] = ()
    server: str | None = None
    local_server: LocalServer | None = None
    takes_auto: bool = False
    roles: tuple[tuple[str, str], ...] = ()
    summary: str = ""
    filter_call: FilterCall | None = None
    #: attach read-only to a user's live collection (:mod:`retrieval.indexes.live`): called
    #: with the spec's ``live:`` mapping and the spec file (for messages); None: cannot attach
    attach: Callable[[Mapping[str, Any], str | None], Any] | None = None
    service: LocalService | None = None
    leftovers: Leftovers | None = None
    thread_settings: ThreadSettings | None = None
    conformance: tuple[Mapping[str, Any], ...] = ()
    hybrid: HybridSearch | None = None
    sparse: SparseFactory | None = None


_ENGINES: dict[str, EngineDescriptor] = {}

#: the roles a backend fills by default somewhere in rwb: ``exact`` (exact search: ground truth
#: checks, a spec's exact first stage), ``hnsw`` (a fan-out collection's default index), ``ivf``
#: (a study's default retrieval index), ``quantizer`` (the build cache's shared IVF training)
ROLES = ("exact", "hnsw", "ivf", "quantizer")


def backend_for(role: str) -> str:
    """The backend that fills ``role`` (the first engine, by name, that claims it)."""
    for desc in all_engines().values():
        for r, backend in desc.roles:
            if r == role:
                return backend
    raise unknown_name_error("backend role", role, ROLES)


def local_server_of(backend: str) -> LocalServer | None:
    """The private-server context manager of ``backend``'s engine (None: it has none)."""
    desc = engine_of_backend(backend)
    return desc.local_server if desc is not None else None


def server_backends() -> tuple[str, ...]:
    """The backends whose engine can run a private server process (``server: true``)."""
    return tuple(b for d in all_engines().values() if d.local_server is not None
                 for b in d.backends)


def services() -> dict[str, LocalService]:
    """The engines that can start a local server (``rwb services start NAME``), by name."""
    return {name: d.service for name, d in all_engines().items() if d.service is not None}


def hybrid_engines() -> dict[str, HybridSearch]:
    """The engines that run a hybrid (dense + sparse) search of their own, by name."""
    return {name: d.hybrid for name, d in all_engines().items() if d.hybrid is not None}


def sparse_engines() -> dict[str, SparseFactory]:
    """The engines that hold BM25 weights in a sparse vector index, by name."""
    return {name: d.sparse for name, d in all_engines().items() if d.sparse is not None}


def leftover_hooks() -> dict[str, Leftovers]:
    """The engines that list what killed runs left on their server, by name."""
    return {name: d.leftovers for name, d in all_engines().items() if d.leftovers is not None}


def check_server_flag(server: bool, backend: str, field: str, where: str | None) -> None:
    """One line when ``server: true`` names a backend whose engine has no local server."""
    if server and local_server_of(backend) is None:
        allowed = ", ".join(f"'{b}'" for b in server_backends()) or "none here"
        raise param_error(field, f"false unless backend is one of {allowed}", server,
                          where=where)
_DISCOVERED = False
_DISCOVERING = False


def register_engine(desc: EngineDescriptor) -> EngineDescriptor:
    """Register ``desc`` under its name (twice with another object is an error)."""
    old = _ENGINES.get(desc.name)
    if old is not None and old != desc:
        raise ValueError(f"engine '{desc.name}' registered twice")
    _ENGINES[desc.name] = desc
    track_packages(desc.libraries)  # every run's manifest records their versions
    if desc.thread_settings is not None:
        track_threads(desc.thread_settings)  # and their thread settings
    return desc


def _builtin_names() -> list[str]:
    spec = importlib.util.find_spec(BUILTIN_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return []
    return sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)
                  if m.ispkg)


def _load_entry_points() -> None:
    """Register the ``rwb.engines`` plugins; a broken one (it fails or exits at import, its
    entry point is malformed, it takes a built-in engine's name) is one warning, never fatal
    for the other commands."""
    try:
        eps = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception as exc:  # a malformed distribution's metadata
        log.warning("rwb.engines entry points could not be read: %s: %s",
                    type(exc).__name__, str(exc)[:200])
        return
    for ep in eps:
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:  # named, never fatal for the others
            log.warning("rwb.engines entry point '%s' (%s) failed to load: %s: %s",
                        ep.name, ep.value, type(exc).__name__, str(exc)[:200])
            continue
        if not isinstance(obj, EngineDescriptor):  # a module that registered at import
            continue
        old = _ENGINES.get(obj.name)
        if old is not None and old != obj:
            log.warning("rwb.engines entry point '%s' (%s) names engine '%s', which is "
                        "already registered (built in or by another plugin); ignored",
                        ep.name, ep.value, obj.name)
            continue
        register_engine(obj)


def discover() -> None:
    """Import every built-in engine package and every ``rwb.engines`` entry point (once)."""
    global _DISCOVERED, _DISCOVERING
    if _DISCOVERED or _DISCOVERING:
        return
    _DISCOVERING = True
    try:
        for name in _builtin_names():
            importlib.import_module(f"{BUILTIN_PACKAGE}.{name}")
        _load_entry_points()
        _DISCOVERED = True
    finally:
        _DISCOVERING = False


def all_engines() -> dict[str, EngineDescriptor]:
    """Every registered engine by name (sorted)."""
    discover()
    return dict(sorted(_ENGINES.items()))


def engine_names() -> tuple[str, ...]:
    return tuple(all_engines())


def get_engine(name: str, *, where: str | None = None) -> EngineDescriptor:
    """The engine ``name``, or one line naming the known ones."""
    engines = all_engines()
    if name not in engines:
        raise unknown_name_error("engine", name, engines, where=where)
    return engines[name]


def engine_of_backend(backend: str) -> EngineDescriptor | None:
    """The engine whose folder registers ``backend`` (None for a backend of no engine)."""
    for desc in all_engines().values():
        if backend in desc.backends:
            return desc
    return None


def install_hint(backend: str) -> str:
    """``pip install ...`` for the extra that brings ``backend``'s engine."""
    desc = engine_of_backend(backend)
    extra = desc.extra if desc is not None and desc.extra else backend.split("-")[0]
    return f"pip install 'retrieval-workbench[{extra}]'"


def ef_knobs() -> tuple[str, ...]:
    """Every engine's HNSW candidate-list knob name (``ef_search``, ``ef``, ...)."""
    return tuple(dict.fromkeys(d.ef_knob for d in all_engines().values() if d.ef_knob))


def search_knobs() -> tuple[str, ...]:
    """Every engine's search knob names (recall-monotone first within each engine)."""
    seen: dict[str, None] = {}
    for desc in all_engines().values():
        for knob in desc.knobs:
            seen.setdefault(knob, None)
    return tuple(seen)


__all__ = [
    "BUILTIN_PACKAGE",
    "ENTRY_POINT_GROUP",
    "ROLES",
    "EngineDescriptor",
    "FilterKnobs",
    "Leftovers",
    "LocalServer",
    "LocalService",
    "ThreadSettings",
    "all_engines",
    "backend_for",
    "check_server_flag",
    "discover",
    "ef_knobs",
    "engine_names",
    "engine_of_backend",
    "get_engine",
    "hybrid_engines",
    "install_hint",
    "leftover_hooks",
    "local_server_of",
    "register_engine",
    "search_knobs",
    "server_backends",
    "services",
    "sparse_engines",
]
