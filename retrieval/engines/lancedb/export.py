"""LanceDB in its own names: the arguments of ``table.create_index("vector", config=...)``
(``index_type`` IVF_PQ -> ``lancedb.index.IvfPq``, IVF_HNSW_SQ -> ``IvfHnswSq``, with
``distance_type``, ``num_partitions``, ``num_sub_vectors``, ``num_bits``, ``m``,
``ef_construction``, ``max_iterations``, ``sample_rate``) and of the query
(``.distance_type(...)``, ``.nprobes(n)``, ``.refine_factor(r)``, ``.ef(e)``); and the way back
(:func:`from_native`). LanceDB ``l2`` is rwb's squared l2, ``cosine`` rwb's ``1 - cos``, ``dot``
ranks as rwb's ``ip``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.engines.lancedb.params import (
    DISTANCE,
    EF_MAX,
    MAX_ITERATIONS,
    PARTITIONS_MAX,
    REFINE_FACTOR_MAX,
    SAMPLE_RATE,
    HnswSqBuild,
    HnswSqSearch,
    IvfPqBuild,
    IvfPqSearch,
    check_search,
)
from retrieval.errors import param_error
from retrieval.indexes.portable import (
    Hnsw,
    Ivf,
    Portable,
    Rebuilt,
    cannot_express,
    dim_is,
    metric_is,
)
from retrieval.params import Params, validate_params

Distance = Literal["l2", "cosine", "dot"]
INDEX_TYPES = ("IVF_PQ", "IVF_HNSW_SQ")


class IvfPqArgs(Params):
    """``create_index("vector", config=IvfPq(...))``; rwb builds with LanceDB's default
    ``max_iterations`` and ``sample_rate`` (a file saying otherwise was not measured by rwb)."""

    column: Literal["vector"] = "vector"
    index_type: Literal["IVF_PQ"]
    distance_type: Distance
    num_partitions: int = Field(ge=1, le=PARTITIONS_MAX)
    num_sub_vectors: int = Field(ge=1, le=4096)
    num_bits: Literal[4, 8] = 8
    max_iterations: Literal[50] = 50  # MAX_ITERATIONS
    sample_rate: Literal[256] = 256  # SAMPLE_RATE


class HnswSqArgs(Params):
    """``create_index("vector", config=IvfHnswSq(...))`` (same defaults as :class:`IvfPqArgs`)."""

    column: Literal["vector"] = "vector"
    index_type: Literal["IVF_HNSW_SQ"]
    distance_type: Distance
    num_partitions: int = Field(ge=1, le=PARTITIONS_MAX)
    m: int = Field(ge=2, le=256)
    ef_construction: int = Field(ge=1, le=16384)
    max_iterations: Literal[50] = 50  # MAX_ITERATIONS
    sample_rate: Literal[256] = 256  # SAMPLE_RATE


class LanceQuery(Params):
    """The query: ``table.search(q).distance_type(d).nprobes(n)[.refine_factor(r)][.ef(e)]``."""

    distance_type: Distance
    nprobes: int = Field(ge=1, le=PARTITIONS_MAX)
    refine_factor: int | None = Field(None, ge=1, le=REFINE_FACTOR_MAX)
    ef: int | None = Field(None, ge=1, le=EF_MAX)


class LanceConfig(Params):
    """A LanceDB vector index (``create_index`` arguments) and the query it was measured with."""

    dim: int = Field(ge=1)
    create_index: IvfPqArgs | HnswSqArgs
    query: LanceQuery


def _document(dim: int, args: dict[str, Any], query: dict[str, Any]) -> dict[str, Any]:
    doc = {"dim": dim, "create_index": {"column": "vector", **args,
                                        "max_iterations": MAX_ITERATIONS,
                                        "sample_rate": SAMPLE_RATE},
           "query": query}
    return validate_params(LanceConfig, doc, where="lancedb export").model_dump(
        exclude_none=True)


def to_lancedb(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    """IVF-PQ (Faiss ``IVF..,PQ..`` or rwb's lancedb-ivfpq) or HNSW over SQ8 (Milvus HNSW_SQ,
    Qdrant scalar, rwb's lancedb-hnsw) in LanceDB's names."""
    dt = DISTANCE[metric]
    where = "lancedb export"
    if isinstance(p, Ivf):
        if p.encoding != "pq" or p.pq_m is None:
            raise cannot_express("lancedb", p, f"lancedb export takes IVF with PQ codes "
                                 f"(IVF_PQ); received encoding '{p.encoding}'")
        rf = p.k_factor if p.refine else None
        b = validate_params(IvfPqBuild, {"num_partitions": p.nlist, "num_sub_vectors": p.pq_m,
                                         "num_bits": p.pq_nbits},
                            where=where, prefix="create_index.")
        s = validate_params(IvfPqSearch, {"nprobes": p.nprobe, "refine_factor": rf},
                            where=where, prefix="query.")
        check_search("lancedb-ivfpq", b, s, k)
        if dim % b.num_sub_vectors:
            raise param_error("create_index.num_sub_vectors", f"a divisor of the dimension {dim}",
                              b.num_sub_vectors, where=where)
        return _document(dim, {"index_type": "IVF_PQ", "distance_type": dt, **b.model_dump()},
                         {"distance_type": dt, **s.model_dump()})
    if isinstance(p, Hnsw):
        if p.quantization != "SQ8":
            raise cannot_express("lancedb", p, "lancedb export takes HNSW over 8-bit scalar "
                                 "quantization (IVF_HNSW_SQ)")
        native = p.native_for("lancedb")
        parts = native.get("num_partitions", 1)
        hb = validate_params(HnswSqBuild, {"m": p.M, "ef_construction": p.ef_construction,
                                           "num_partitions": parts},
                             where=where, prefix="create_index.")
        hs = validate_params(HnswSqSearch, {"ef": p.ef_search,
                                            "nprobes": native.get("nprobes", parts),
                                            "refine_factor": native.get("refine_factor")},
                             where=where, prefix="query.")
        check_search("lancedb-hnsw", hb, hs, k)
        return _document(dim, {"index_type": "IVF_HNSW_SQ", "distance_type": dt,
                               **hb.model_dump()}, {"distance_type": dt, **hs.model_dump()})
    raise cannot_express("lancedb", p, "lancedb export takes IVF_PQ or IVF_HNSW_SQ results")


def from_lancedb(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    """The rwb backend and params that build and query what ``cfg`` says."""
    raw = cfg.get("create_index") if isinstance(cfg, Mapping) else None
    kind = raw.get("index_type") if isinstance(raw, Mapping) else None
    if kind not in INDEX_TYPES:
        raise param_error("config.create_index.index_type", f"one of {', '.join(INDEX_TYPES)}",
                          kind, where=where)
    args: IvfPqArgs | HnswSqArgs = (
        validate_params(IvfPqArgs, raw, where=where, prefix="config.create_index.")
        if kind == "IVF_PQ" else
        validate_params(HnswSqArgs, raw, where=where, prefix="config.create_index."))
    c = validate_params(LanceConfig, {**cfg, "create_index": args.model_dump()}, where=where,
                        prefix="config.")
    q = c.query
    metric_is(args.distance_type, metric, "create_index.distance_type", DISTANCE, where)
    if q.distance_type != args.distance_type:  # LanceDB would scan every row
        raise param_error("config.query.distance_type", f"'{args.distance_type}' (the index's "
                          f"distance_type; another one is a brute-force scan)", q.distance_type,
                          where=where)
    dim_is(c.dim, dim, "dim", where)
    if q.nprobes > args.num_partitions:
        raise param_error("config.query.nprobes", f"in [1, create_index.num_partitions="
                          f"{args.num_partitions}]", q.nprobes, where=where)
    search: dict[str, Any] = {"nprobes": q.nprobes, "refine_factor": q.refine_factor}
    if isinstance(args, IvfPqArgs):
        if q.ef is not None:
            raise param_error("config.query.ef", "absent for IVF_PQ (an HNSW knob)", q.ef,
                              where=where)
        if dim % args.num_sub_vectors:
            raise param_error("config.create_index.num_sub_vectors",
                              f"a divisor of the dimension {dim}", args.num_sub_vectors,
                              where=where)
        return Rebuilt("lancedb-ivfpq", {"num_partitions": args.num_partitions,
                                         "num_sub_vectors": args.num_sub_vectors,
                                         "num_bits": args.num_bits}, search)
    assert isinstance(args, HnswSqArgs)
    least = k * (q.refine_factor or 1)
    if q.ef is None or q.ef < least:
        raise param_error("config.query.ef", f">= k * refine_factor ({least}, the evidence's k "
                          f"{k})", q.ef, where=where)
    return Rebuilt("lancedb-hnsw", {"m": args.m, "ef_construction": args.ef_construction,
                                    "num_partitions": args.num_partitions},
                   {**search, "ef": q.ef})


to_native = to_lancedb
from_native = from_lancedb

__all__ = ["LanceConfig", "from_lancedb", "from_native", "to_lancedb", "to_native"]
