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


@dataclass(frozen=True)
class Hnsw:
    M: int
    ef_construction: int
    ef_search: int
    quantization: str | None = None  # "SQ8" for Milvus HNSW_SQ


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
