"""Weaviate (export only: rwb cannot run it) in its own names: ``vectorIndexType: hnsw`` +
``vectorIndexConfig`` (``maxConnections``, ``efConstruction``, ``ef``, ``distance``), and its
neutral form (:func:`portable_reader`) so ``rwb verify --engine NAME`` can measure its settings on
an engine rwb runs. rwb l2 (squared) = Weaviate l2-squared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.errors import param_error
from retrieval.indexes.portable import Hnsw, Portable, hnsw_only, metric_is
from retrieval.params import Params, validate_params


class WeaviateIndexConfig(Params):
    maxConnections: int = Field(ge=1)
    efConstruction: int = Field(ge=1)
    ef: int = Field(ge=1)
    distance: Literal["cosine", "dot", "l2-squared"]


class WeaviateConfig(Params):
    vectorIndexType: Literal["hnsw"]
    vectorIndexConfig: WeaviateIndexConfig


def to_weaviate(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    h = hnsw_only("weaviate", p)
    if h.ef_search < k:
        raise param_error("vectorIndexConfig.ef", f">= k ({k})", h.ef_search,
                          where="weaviate export")
    distance = {"l2": "l2-squared", "ip": "dot", "cosine": "cosine"}[metric]
    doc = {
        "vectorIndexType": "hnsw",
        "vectorIndexConfig": {"maxConnections": h.M, "efConstruction": h.ef_construction,
                              "ef": h.ef_search, "distance": distance},
    }
    return validate_params(WeaviateConfig, doc, where="weaviate export").model_dump()


def weaviate_portable(cfg: Mapping[str, Any], metric: str, where: str) -> Hnsw:
    """The neutral HNSW form of a Weaviate ``vectorIndexConfig`` (rwb cannot run Weaviate; this
    lets ``rwb verify --engine NAME`` measure its settings on an engine rwb runs)."""

    c = validate_params(WeaviateConfig, cfg, where=where, prefix="config.")
    v = c.vectorIndexConfig
    metric_is(v.distance, metric, "vectorIndexConfig.distance",
               {"l2": "l2-squared", "ip": "dot", "cosine": "cosine"}, where)
    return Hnsw(v.maxConnections, v.efConstruction, v.ef)


to_native = to_weaviate
portable_reader = weaviate_portable
