"""A tuned config in library-neutral terms, read from what a backend measured.

Every backend's build/search params map to one of :class:`Hnsw`, :class:`Ivf`, :class:`Flat` or
:class:`Auto`; engines (:mod:`retrieval.export.engines`) translate these into their own names.
HNSW ``M`` means the same everywhere rwb exports (hnswlib, Faiss, Milvus/knowhere, Qdrant ``m``,
Weaviate ``maxConnections``): links per node on the upper layers, ``2 * M`` on layer 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrieval.errors import ConfigError


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


def portable(backend: str, build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable:
    """The neutral form of a backend's full build/search params (defaults filled in)."""
    b, s = dict(build), dict(search)
    if backend in ("hnswlib", "faiss-hnsw"):
        return Hnsw(int(b["M"]), int(b["ef_construction"]), int(s["ef_search"]))
    if backend == "faiss-ivf":
        return Ivf(
            nlist=int(b["nlist"]),
            nprobe=int(s.get("nprobe", 1)),
            encoding=str(b.get("encoding", "flat")),
            pq_m=b.get("pq_m"),
            pq_nbits=int(b.get("pq_nbits", 8)),
            refine=bool(b.get("refine", False)),
            k_factor=int(s.get("k_factor", 1)),
        )
    if backend == "faiss-flat":
        return Flat()
    if backend == "milvus":
        kind = str(b.get("index_type", "HNSW")).upper()
        if kind in ("HNSW", "HNSW_SQ"):
            quant = "SQ8" if kind == "HNSW_SQ" else None
            return Hnsw(int(b["M"]), int(b["efConstruction"]), int(s["ef"]), quant)
        if kind in ("IVF_FLAT", "IVF_SQ8"):
            enc = "sq8" if kind == "IVF_SQ8" else "flat"
            return Ivf(int(b["nlist"]), int(s["nprobe"]), enc)
        if kind == "FLAT":
            return Flat()
        if kind == "AUTOINDEX":
            return Auto()
    raise ConfigError(
        f"backend '{backend}' has no export mapping (exportable: hnswlib, faiss-hnsw, faiss-ivf, "
        f"faiss-flat, milvus)"
    )
