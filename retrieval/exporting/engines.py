"""Engine-native configs: each engine's own parameter names, validated against its own rules.

The translations live in the engine folders (``retrieval/engines/<name>/export.py``) and are
found through the engine descriptors (:mod:`retrieval.indexes.engine`); this module dispatches.
"""

from __future__ import annotations

from typing import Any

from retrieval.errors import unknown_name_error
from retrieval.indexes.base import SupportsPortable
from retrieval.indexes.engine import all_engines
from retrieval.indexes.portable import Auto, Portable, cannot_express
from retrieval.indexes.registry import all_backends


def own_backends(engine: str) -> tuple[str, ...]:
    """The rwb backends that run ``engine``'s own library (preferred as the source of an
    export): each exportable backend names its engine (``export_engine``)."""
    return tuple(name for name, cls in all_backends().items()
                 if isinstance(cls, SupportsPortable) and cls.export_engine == engine)


def ann_engines() -> tuple[str, ...]:
    """The engines rwb can export an ANN config to (those with a translation)."""
    return tuple(n for n, d in all_engines().items() if d.to_native is not None)


#: the ANN engines (the sweep exporter's keys in :mod:`retrieval.exporting.registry`)
ANN_ENGINES: tuple[str, ...] = ann_engines()


def translate(engine: str, p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    """The engine-native config of ``p`` (ConfigError when the engine cannot express it)."""
    desc = all_engines().get(engine)
    if desc is None or desc.to_native is None:
        raise unknown_name_error("engine", engine, ann_engines(), where="export")
    if isinstance(p, Auto) and not desc.takes_auto:
        raise cannot_express(engine, p, "AUTOINDEX lets the engine choose; only an engine that "
                             "takes it can")
    return desc.to_native(p, metric, dim, k)
