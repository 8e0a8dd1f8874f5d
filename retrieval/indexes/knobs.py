"""Engine-neutral knob columns of a measured config: ``knob`` / ``knob_value`` beside the
per-param ``search.*`` columns, so one query reads the tuned knob of every backend (Milvus
``search.ef``, hnswlib / Faiss ``search.ef_search`` and Qdrant ``search.hnsw_ef`` are all
``knob = ef_search``).

The knob is the backend's first recall-monotone knob (``monotone_knobs_for(build)``) that the
config sets. Its neutral name: ``ef_search`` when it is the engine's HNSW candidate-list knob
(:attr:`~retrieval.indexes.engine.EngineDescriptor.ef_knob`), ``nprobe`` for an IVF probe count
(``nprobe`` / ``nprobes``), else the backend's own name. ``knob_native`` keeps that own name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.indexes.engine import engine_of_backend
from retrieval.indexes.registry import get_backend

#: the columns :func:`knob_columns` returns
COLUMNS = ("knob", "knob_native", "knob_value")


def neutral_knob(backend: str, knob: str) -> str:
    """The engine-neutral name of ``backend``'s search knob ``knob``."""
    desc = engine_of_backend(backend)
    if desc is not None and knob == desc.ef_knob:
        return "ef_search"
    if knob in ("nprobe", "nprobes"):
        return "nprobe"
    return knob


def knob_columns(backend: str, build: Mapping[str, Any], search: Mapping[str, Any]
                 ) -> dict[str, Any]:
    """``{knob, knob_native, knob_value}`` of a config (all None when it sets no monotone knob
    or the backend is not installed)."""
    none = dict.fromkeys(COLUMNS)
    try:
        cls = get_backend(backend)
        try:
            model: Any = cls.BuildParams.model_validate(dict(build))
        except Exception:
            model = None
        knobs = cls.monotone_knobs_for(model)
    except Exception:  # an unknown or uninstalled backend: no knob columns to give
        return none
    for knob in (*knobs, *cls.monotone_knobs):
        if knob in search:
            return {"knob": neutral_knob(backend, knob), "knob_native": knob,
                    "knob_value": search[knob]}
    return none


__all__ = ["COLUMNS", "knob_columns", "neutral_knob"]
