"""From an exported engine config back to the rwb backend that runs it: one inverse per engine.

``rwb verify`` builds what the file's ``config`` says (never the ``source:`` block's params), so
each inverse reads only the engine's own names, validates them against the engine's rules (an
edit outside the limits is one line naming ``config.<field>``) and returns the backend with its
build and search params. :data:`INVERSES` is the hook: an engine rwb runs registers its inverse
there (pgvector's reads its SQL back through :mod:`retrieval.export.engine_pgvector`); an engine
with none (weaviate) is "not measurable here".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.portable import Hnsw
from retrieval.params import validate_params


@dataclass(frozen=True)
class Rebuilt:
    """What an engine config means for rwb: ``backend`` with ``build`` and ``search`` params."""

    backend: str
    build: dict[str, Any]
    search: dict[str, Any]
    notes: list[str] = field(default_factory=list)


Inverse = Callable[[Mapping[str, Any], str, int, int, str], Rebuilt]


def _where(where: str) -> str:
    return f"{where}: config"


def _metric_is(got: str, metric: str, name: str, allowed: Mapping[str, str], where: str) -> None:
    if allowed.get(metric) != got:
        raise param_error(f"config.{name}", f"'{allowed.get(metric)}' (the data's metric is "
                          f"{metric})", got, where=where)


def _ef_at_least_k(got: int, k: int, name: str, where: str) -> None:
    if got < k:
        raise param_error(f"config.{name}", f">= k ({k}, the evidence's k)", got, where=where)


def _dim_is(got: Any, dim: int, name: str, where: str) -> None:
    if got != dim:
        raise param_error(f"config.{name}", f"{dim} (the data's dimension)", got, where=where)


def from_hnswlib(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    from retrieval.export.engines import HnswlibConfig

    c = validate_params(HnswlibConfig, cfg, where=where, prefix="config.")
    _metric_is(c.space, metric, "space", {m: m for m in ("l2", "ip", "cosine")}, where)
    _dim_is(c.dim, dim, "dim", where)
    _ef_at_least_k(c.ef, k, "ef", where)
    return Rebuilt("hnswlib", {"M": c.M, "ef_construction": c.ef_construction},
                   {"ef_search": c.ef})


def from_faiss(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    from retrieval.export.engines import FaissConfig, check_faiss

    c = validate_params(FaissConfig, cfg, where=where, prefix="config.")
    _dim_is(c.dim, dim, "dim", where)
    want = "METRIC_L2" if metric == "l2" else "METRIC_INNER_PRODUCT"
    if c.metric != want or c.normalize_vectors != (metric == "cosine"):
        raise param_error("config.metric", f"{want} with normalize_vectors "
                          f"{metric == 'cosine'} (the data's metric is {metric})",
                          f"{c.metric}, normalize_vectors {c.normalize_vectors}", where=where)
    fac = c.index_factory
    if not re.fullmatch(r"HNSW\d+|IVF\d+,(Flat|SQ8|PQ\d+x\d+np)(,RFlat)?|Flat", fac):
        raise param_error("config.index_factory", "HNSW<M>, IVF<nlist>,Flat|SQ8|PQ<m>x<b>np"
                          "[,RFlat] or Flat (what rwb's faiss backends build)", fac, where=where)
    try:
        check_faiss(dict(cfg))
    except ConfigError as exc:
        raise ConfigError(f"{where}: config: {' '.join(str(exc).split())}") from None
    space = dict(re.findall(r"(\w+)=(\d+)", c.parameter_space))
    if m := re.fullmatch(r"HNSW(\d+)", fac):
        efc = c.index_fields.get("hnsw.efConstruction", 40)
        return Rebuilt("faiss-hnsw", {"M": int(m[1]), "ef_construction": int(efc)},
                       {"ef_search": int(space.get("efSearch", 16))})
    if m := re.fullmatch(r"IVF(\d+),(Flat|SQ8|PQ(\d+)x(\d+)np)(,RFlat)?", fac):
        build: dict[str, Any] = {"nlist": int(m[1])}
        if m[2] == "SQ8":
            build["encoding"] = "sq8"
        elif m[3]:
            build.update(encoding="pq", pq_m=int(m[3]), pq_nbits=int(m[4]))
        search: dict[str, Any] = {"nprobe": int(space.get("nprobe", 1))}
        if m[5]:
            build["refine"] = True
            search["k_factor"] = int(space.get("k_factor_rf", 1))
        return Rebuilt("faiss-ivf", build, search)
    if fac == "Flat":
        return Rebuilt("faiss-flat", {}, {})
    raise param_error("config.index_factory", "HNSW<M>, IVF<nlist>,Flat|SQ8|PQ<m>x<b>np[,RFlat] "
                      "or Flat (what rwb's faiss backends build)", fac, where=where)


def from_milvus(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    from retrieval.export.engines import _MILVUS_METRIC
    from retrieval.indexes._milvus_params import MilvusBuild, search_model_for

    for key in ("index_type", "metric_type", "params", "search_params"):
        if key not in cfg:
            raise ConfigError(f"{where}: field 'config.{key}' is missing")
    _metric_is(str(cfg["metric_type"]), metric, "metric_type", _MILVUS_METRIC, where)
    params = cfg.get("params") or {}
    sp = (cfg.get("search_params") or {})
    if not isinstance(params, Mapping) or not isinstance(sp, Mapping):
        raise param_error("config.params", "a mapping", params, where=where)
    build = validate_params(MilvusBuild, {"index_type": cfg["index_type"], **params},
                            where=where, prefix="config.params.")
    search = validate_params(search_model_for(build), sp.get("params") or {}, where=where,
                             prefix="config.search_params.params.")
    return Rebuilt("milvus", build.model_dump(exclude_none=True),
                   search.model_dump(exclude_none=True))


def from_qdrant(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    from retrieval.export.engines import QdrantConfig

    c = validate_params(QdrantConfig, cfg, where=where, prefix="config.")
    _metric_is(c.vectors.distance, metric, "vectors.distance",
               {"l2": "Euclid", "ip": "Dot", "cosine": "Cosine"}, where)
    _dim_is(c.vectors.size, dim, "vectors.size", where)
    _ef_at_least_k(c.search_params.hnsw_ef, k, "search_params.hnsw_ef", where)
    if c.vectors.on_disk != c.hnsw_config.on_disk:
        raise param_error("config.hnsw_config.on_disk", f"equal to vectors.on_disk "
                          f"({c.vectors.on_disk}; rwb's backend sets both)",
                          c.hnsw_config.on_disk, where=where)
    build: dict[str, Any] = {
        "m": c.hnsw_config.m, "ef_construct": c.hnsw_config.ef_construct,
        "full_scan_threshold": c.hnsw_config.full_scan_threshold,
        "indexing_threshold": c.optimizers_config.indexing_threshold,
        "on_disk": c.vectors.on_disk,
    }
    q = c.quantization_config
    kinds = [n for n in ("scalar", "binary", "product") if q is not None and getattr(q, n)]
    if len(kinds) > 1:
        raise param_error("config.quantization_config", "one of scalar, binary, product",
                          ", ".join(kinds), where=where)
    search: dict[str, Any] = {"hnsw_ef": c.search_params.hnsw_ef}
    acorn = c.search_params.acorn
    if acorn is not None and acorn.enable:  # used by filtered searches only
        search["acorn"] = True
        if acorn.max_selectivity is not None:
            search["acorn_max_selectivity"] = acorn.max_selectivity
    if kinds and q is not None:
        kind = kinds[0]
        build["quantization"] = kind
        sub = getattr(q, kind)
        build["always_ram"] = sub.always_ram
        if kind == "scalar" and sub.quantile is not None:
            build["quantile"] = sub.quantile
        if kind == "product":
            build["pq_compression"] = sub.compression
        qs = c.search_params.quantization
        if qs is not None:
            search.update(rescore=qs.rescore, oversampling=qs.oversampling)
    elif c.search_params.quantization is not None:
        raise param_error("config.search_params.quantization", "absent without a "
                          "quantization_config", c.search_params.quantization.model_dump(),
                          where=where)
    return Rebuilt("qdrant", build, search)


def from_redis(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    from retrieval.export.engines import RedisConfig, redis_strings
    from retrieval.indexes.redis_index import METRIC

    c = validate_params(RedisConfig, cfg, where=where, prefix="config.")
    a = c.vector_field.attributes
    _metric_is(a.DISTANCE_METRIC, metric, "vector_field.attributes.DISTANCE_METRIC", METRIC,
               where)
    _dim_is(a.DIM, dim, "vector_field.attributes.DIM", where)
    create, query = redis_strings(c.vector_field.model_dump(), k)
    if " ".join(c.ft_create.split()) != create:
        raise param_error("config.ft_create", f"the command vector_field describes ('{create}')",
                          c.ft_create, where=where)
    if " ".join(c.query.split()) != query:
        raise param_error("config.query", f"'{query}' (k {k}, as vector_field says)", c.query,
                          where=where)
    if c.vector_field.algorithm == "FLAT":
        return Rebuilt("redis", {"algorithm": "FLAT"}, {})
    build: dict[str, Any] = {"algorithm": "HNSW"}
    for name in ("M", "EF_CONSTRUCTION", "EPSILON"):
        value = getattr(a, name)
        if value is None:
            raise ConfigError(f"{where}: field 'config.vector_field.attributes.{name}' is "
                              f"missing (HNSW)")
        build[name] = value
    if c.query_params.EF_RUNTIME is None:
        raise ConfigError(f"{where}: field 'config.query_params.EF_RUNTIME' is missing (HNSW)")
    _ef_at_least_k(c.query_params.EF_RUNTIME, k, "query_params.EF_RUNTIME", where)
    return Rebuilt("redis", build, {"EF_RUNTIME": c.query_params.EF_RUNTIME})


def weaviate_portable(cfg: Mapping[str, Any], metric: str, where: str) -> Hnsw:
    """The neutral HNSW form of a Weaviate ``vectorIndexConfig`` (rwb cannot run Weaviate; this
    lets ``rwb verify --engine NAME`` measure its settings on an engine rwb runs)."""
    from retrieval.export.engines import WeaviateConfig

    c = validate_params(WeaviateConfig, cfg, where=where, prefix="config.")
    v = c.vectorIndexConfig
    _metric_is(v.distance, metric, "vectorIndexConfig.distance",
               {"l2": "l2-squared", "ip": "dot", "cosine": "cosine"}, where)
    return Hnsw(v.maxConnections, v.efConstruction, v.ef)


#: engine -> its config in neutral terms, for engines rwb cannot run (``--engine`` transfers)
PORTABLE_READERS: dict[str, Callable[[Mapping[str, Any], str, str], Hnsw]] = {
    "weaviate": weaviate_portable,
}

#: engine -> inverse (the hook: an engine rwb can run adds its own here)
INVERSES: dict[str, Inverse] = {
    "hnswlib": from_hnswlib,
    "faiss": from_faiss,
    "milvus": from_milvus,
    "qdrant": from_qdrant,
    "redis": from_redis,
}


def from_pgvector(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    """pgvector: the SQL read back by :func:`retrieval.export.engine_pgvector.from_pgvector`
    (``create_index`` + ``set`` lines, checked against the structured fields and pgvector's
    limits), then checked against the data's metric and dimension."""
    from retrieval.export.engine_pgvector import from_pgvector as read_pgvector
    from retrieval.indexes._pgvector_params import OPS

    c = read_pgvector(cfg, k)
    if c.metric != metric:
        raise param_error("config.create_index operator class",
                          f"'{OPS.get(metric, metric)}' (the data's metric is {metric})",
                          OPS.get(c.metric, c.metric), where=where)
    _dim_is(c.dim, dim, "dim", where)
    return Rebuilt(c.backend, dict(c.build), dict(c.search))


INVERSES["pgvector"] = from_pgvector


def inverse_for(engine: str) -> Inverse | None:
    """The inverse of ``engine``, or None when rwb cannot run that engine (not measurable)."""
    return INVERSES.get(engine)


__all__ = [
    "INVERSES",
    "PORTABLE_READERS",
    "Rebuilt",
    "from_faiss",
    "from_hnswlib",
    "from_milvus",
    "from_pgvector",
    "from_qdrant",
    "from_redis",
    "inverse_for",
    "weaviate_portable",
]
