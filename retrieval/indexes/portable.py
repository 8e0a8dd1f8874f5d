"""A tuned config in library-neutral terms: what a backend's build/search params mean.

Every exportable backend maps its full build/search params to one of :class:`Hnsw`, :class:`Ivf`,
:class:`Flat` or :class:`Auto` (its ``portable`` classmethod, the
:class:`~retrieval.indexes.base.SupportsPortable` capability); the exporters
(:mod:`retrieval.export.engines`) translate these into each engine's own names.
HNSW ``M`` means the same everywhere rwb exports (hnswlib, Faiss, Milvus/knowhere, Qdrant ``m``,
Weaviate ``maxConnections``): links per node on the upper layers, ``2 * M`` on layer 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hnsw:
    """``quantization``: None, "SQ8" (Milvus HNSW_SQ, Qdrant scalar int8), "BQ" or "PQ" (Qdrant
    binary / product); ``native``: the source engine's own params that have no neutral form
    (Qdrant's thresholds, rescore, oversampling; Redis's EPSILON) as (name, value) pairs, used
    only when exporting to ``native_engine`` itself."""

    M: int
    ef_construction: int
    ef_search: int
    quantization: str | None = None
    native_engine: str = ""
    native: tuple[tuple[str, Any], ...] = ()

    def native_for(self, engine: str) -> dict[str, Any]:
        return dict(self.native) if engine == self.native_engine else {}


@dataclass(frozen=True)
class Ivf:
    nlist: int
    nprobe: int
    encoding: str = "flat"  # flat | sq8 | pq
    pq_m: int | None = None
    pq_nbits: int = 8
    refine: bool = False
    k_factor: int = 1


@dataclass(frozen=True)
class Flat:
    pass


@dataclass(frozen=True)
class Auto:
    """Milvus AUTOINDEX: the engine chooses; only Milvus can take it."""


Portable = Hnsw | Ivf | Flat | Auto

__all__ = ["Auto", "Flat", "Hnsw", "Ivf", "Portable"]
