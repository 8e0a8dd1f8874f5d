"""Backends register themselves by name when their engine package is imported; discovery is
:func:`retrieval.indexes.engine.discover` (built-in engine folders + ``rwb.engines`` entry
points)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from retrieval.data import Metric
from retrieval.errors import BackendError, unknown_name_error
from retrieval.indexes.base import IndexBackend
from retrieval.indexes.engine import install_hint
from retrieval.params import Params, validate_params

log = logging.getLogger(__name__)

_REGISTRY: dict[str, type[IndexBackend]] = {}
_DISCOVERED = False

T = TypeVar("T", bound=type[IndexBackend])


def register(cls: T) -> T:
    """Class decorator: register a backend under ``cls.name``."""
    name = cls.name
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"backend '{name}' registered twice")
    _REGISTRY[name] = cls
    return cls


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    from retrieval.indexes.engine import discover

    discover()
    _DISCOVERED = True


def all_backends() -> dict[str, type[IndexBackend]]:
    """Every registered backend class by name, importable or not."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


@dataclass(frozen=True)
class BackendStatus:
    name: str
    family: str
    available: bool
    version: str
    reason: str


def backend_status() -> list[BackendStatus]:
    """Availability and library version of every backend (for ``rwb backends``)."""
    out = []
    for name, cls in all_backends().items():
        missing = [m for m in cls.requires if importlib.util.find_spec(m) is None]
        if missing:
            out.append(BackendStatus(name, cls.family, False, "", f"missing {', '.join(missing)}"))
            continue
        try:
            version = cls.library_version()
        except Exception as exc:  # a broken install is reported, not raised
            out.append(BackendStatus(name, cls.family, False, "", f"{type(exc).__name__}: {exc}"))
            continue
        out.append(BackendStatus(name, cls.family, True, version, ""))
    return out


def get_backend(name: str, *, where: str | None = None) -> type[IndexBackend]:
    backends = all_backends()
    if name not in backends:
        raise unknown_name_error("backend", name, backends, where=where)
    cls = backends[name]
    missing = [m for m in cls.requires if importlib.util.find_spec(m) is None]
    if missing:
        raise BackendError(
            f"{where + ': ' if where else ''}backend '{name}' needs {', '.join(missing)}, "
            f"which is not installed ({install_hint(name)})"
        )
    return cls


def create_index(
    name: str,
    dim: int,
    metric: Metric,
    build: dict[str, Any] | Params | None = None,
    *,
    seed: int = 0,
    threads: int = 1,
    workdir: Path | None = None,
) -> IndexBackend:
    """Instantiate backend ``name`` with validated build params."""
    cls = get_backend(name)
    params = (
        build
        if isinstance(build, Params)
        else validate_params(cls.BuildParams, build, where=f"backend '{name}' build params")
    )
    return cls(dim, metric, params, seed=seed, threads=threads, workdir=workdir)


def package_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""
