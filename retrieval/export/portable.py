"""A tuned config in library-neutral terms, read from what a backend measured.

The neutral forms (:class:`Hnsw`, :class:`Ivf`, :class:`Flat`, :class:`Auto`) live in
:mod:`retrieval.indexes.portable`; each backend maps its own params to them (its ``portable``
classmethod, :class:`~retrieval.indexes.base.SupportsPortable`), so a new backend becomes
exportable in its own module. Engines (:mod:`retrieval.export.engines`) translate the neutral
forms into their own names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.errors import ConfigError
from retrieval.indexes.base import SupportsPortable
from retrieval.indexes.portable import Auto, Flat, Hnsw, Ivf, Portable
from retrieval.indexes.registry import all_backends


def exportable_backends() -> list[str]:
    """Names of the registered backends that have an export mapping."""
    return [name for name, cls in all_backends().items() if isinstance(cls, SupportsPortable)]


def portable(backend: str, build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable:
    """The neutral form of a backend's full build/search params (defaults filled in)."""
    cls = all_backends().get(backend)
    p = cls.portable(dict(build), dict(search)) if isinstance(cls, SupportsPortable) else None
    if p is None:
        raise ConfigError(
            f"backend '{backend}' has no export mapping (exportable: "
            f"{', '.join(exportable_backends())})"
        )
    return p


def stated_build(backend: str, build: Mapping[str, Any]) -> dict[str, Any]:
    """``build`` (a backend's resolved build params) without the fields equal to their default:
    the same index, in a form the backend accepts again (a resolved default may be refused when
    stated, e.g. Qdrant's ``pq_compression`` without product quantization)."""
    cls = all_backends().get(backend)
    fields = getattr(getattr(cls, "BuildParams", None), "model_fields", None) or {}
    out = {}
    for name, value in build.items():
        f = fields.get(name)
        if f is None or f.is_required() or f.default_factory is not None or value != f.default:
            out[name] = value
    return out


__all__ = ["Auto", "Flat", "Hnsw", "Ivf", "Portable", "exportable_backends", "portable",
           "stated_build"]
