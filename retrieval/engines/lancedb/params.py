"""Parameters of the ``lancedb-*`` backends and their checks (not a backend: no ``register``).

Names are LanceDB's own (``num_partitions``, ``num_sub_vectors``, ``num_bits``, ``m``,
``ef_construction`` of ``create_index``; ``nprobes``, ``refine_factor``, ``ef`` of the query), so
a sweep spec and an export read the same. Limits are checked here, before anything reaches the
engine: LanceDB trains fewer IVF partitions than asked when the table is small (at most
``n // sample_rate``; it says so in a log line only) and accepts an ``nprobes`` above the number
of partitions without a word.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.errors import param_error
from retrieval.indexes.inprocess import check_k
from retrieval.indexes.portable import Hnsw, Ivf
from retrieval.params import Params

#: LanceDB's training sample per IVF partition (``sample_rate``) and k-means iterations
#: (``max_iterations``): rwb builds with LanceDB's defaults and writes them in the export
SAMPLE_RATE = 256
MAX_ITERATIONS = 50
PARTITIONS_MAX = 1 << 16
REFINE_FACTOR_MAX = 64
EF_MAX = 4096
#: LanceDB's ``distance_type`` for each rwb metric
DISTANCE = {"l2": "l2", "cosine": "cosine", "ip": "dot"}


class IvfPqBuild(Params):
    """``create_index("vector", config=IvfPq(...))``: ``num_partitions`` IVF lists (k-means
    centroids, at most ``n // 256``), ``num_sub_vectors`` PQ sub-vectors (divides the
    dimension) of ``num_bits`` bits each."""

    num_partitions: int = Field(16, ge=1, le=PARTITIONS_MAX)
    num_sub_vectors: int = Field(8, ge=1, le=4096)
    num_bits: Literal[4, 8] = 8


class IvfPqSearch(Params):
    """``nprobes``: partitions visited per query (1..num_partitions; rwb sets LanceDB's minimum
    and maximum nprobes both to it); ``refine_factor``: None (the PQ distances rank the result)
    or re-rank ``k * refine_factor`` candidates by their full vectors (exact distances)."""

    nprobes: int = Field(1, ge=1, le=PARTITIONS_MAX)
    refine_factor: int | None = Field(None, ge=1, le=REFINE_FACTOR_MAX)


class HnswSqBuild(Params):
    """``create_index("vector", config=IvfHnswSq(...))``: ``num_partitions`` IVF lists (1: one
    HNSW graph over every vector), each an HNSW graph (``m`` links per node, ``ef_construction``
    candidates while building) over 8-bit scalar-quantized vectors."""

    m: int = Field(20, ge=2, le=256)
    ef_construction: int = Field(300, ge=1, le=16384)
    num_partitions: int = Field(1, ge=1, le=PARTITIONS_MAX)


class HnswSqSearch(Params):
    """``ef``: candidate list per query and partition (>= k, and >= k * refine_factor: LanceDB
    asks the graph for that many); ``nprobes``: partitions visited (1..num_partitions);
    ``refine_factor``: None (SQ distances) or re-rank ``k * refine_factor`` candidates exactly."""

    ef: int = Field(64, ge=1, le=EF_MAX)
    nprobes: int = Field(1, ge=1, le=PARTITIONS_MAX)
    refine_factor: int | None = Field(None, ge=1, le=REFINE_FACTOR_MAX)


def where_of(backend: str) -> str:
    return f"backend '{backend}'"


def check_dim(backend: str, build: Params, dim: int) -> None:
    """``num_sub_vectors`` divides the dimension (LanceDB refuses the build otherwise)."""
    if isinstance(build, IvfPqBuild) and dim % build.num_sub_vectors:
        raise param_error("num_sub_vectors", f"a divisor of the dimension {dim}",
                          build.num_sub_vectors, where=f"{where_of(backend)} build params")


def check_rows(backend: str, num_partitions: int, n: int) -> None:
    """LanceDB trains at most ``n // 256`` partitions (fewer than asked, silently for rwb); a
    table of fewer than 256 vectors per partition is refused here instead."""
    most = n // SAMPLE_RATE
    if num_partitions > most:
        allowed = (f"<= {most} for {n} vectors (LanceDB trains at most n // {SAMPLE_RATE} "
                   f"partitions and would train fewer than asked)" if most else
                   f"given >= {SAMPLE_RATE} vectors per partition; {n} vectors are too few "
                   f"for an IVF index")
        raise param_error("num_partitions", allowed, num_partitions,
                          where=f"{where_of(backend)} build params")


def check_search(backend: str, build: Params, search: Params, k: int) -> None:
    """``nprobes <= num_partitions``; for HNSW, ``ef >= k * (refine_factor or 1)``."""
    where = f"{where_of(backend)} search params"
    k = check_k(k, where)
    assert isinstance(build, IvfPqBuild | HnswSqBuild)
    assert isinstance(search, IvfPqSearch | HnswSqSearch)
    if search.nprobes > build.num_partitions:
        raise param_error("nprobes", f"in [1, num_partitions={build.num_partitions}]",
                          search.nprobes, where=where)
    if isinstance(search, HnswSqSearch):
        least = k * (search.refine_factor or 1)
        if search.ef < least:
            why = (f"k * refine_factor ({k} * {search.refine_factor})" if search.refine_factor
                   else f"k ({k})")
            raise param_error("ef", f">= {why} and <= {EF_MAX} (LanceDB refuses a smaller ef)",
                              search.ef, where=where)


def portable_ivfpq(build: Mapping[str, Any], search: Mapping[str, Any]) -> Ivf:
    """IVF-PQ in neutral terms (Faiss ``IVF<n>,PQ<m>x<b>np[,RFlat]``: the same lists, codes
    and exact re-rank of ``k * refine_factor`` candidates)."""
    rf = search.get("refine_factor")
    return Ivf(nlist=int(build["num_partitions"]), nprobe=int(search.get("nprobes", 1)),
               encoding="pq", pq_m=int(build["num_sub_vectors"]),
               pq_nbits=int(build.get("num_bits", 8)), refine=rf is not None,
               k_factor=int(rf or 1))


#: LanceDB-only params of IVF_HNSW_SQ carried in Hnsw.native (no neutral form)
HNSW_NATIVE = ("num_partitions", "nprobes", "refine_factor")


def portable_hnsw(build: Mapping[str, Any], search: Mapping[str, Any]) -> Hnsw:
    """IVF_HNSW_SQ as HNSW over SQ8; its partitions, nprobes and refine_factor travel as
    LanceDB's own (``native``), used only when exporting to LanceDB."""
    merged = {**build, **search}
    native = tuple((k, merged.get(k)) for k in HNSW_NATIVE)
    return Hnsw(int(build["m"]), int(build["ef_construction"]), int(search["ef"]), "SQ8",
                native_engine="lancedb", native=native)


__all__ = ["DISTANCE", "EF_MAX", "MAX_ITERATIONS", "PARTITIONS_MAX", "REFINE_FACTOR_MAX",
           "SAMPLE_RATE", "HnswSqBuild", "HnswSqSearch", "IvfPqBuild", "IvfPqSearch",
           "check_dim", "check_rows", "check_search", "portable_hnsw", "portable_ivfpq",
           "where_of"]
