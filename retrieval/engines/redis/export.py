"""Redis (RediSearch) in its own names: the ``FT.CREATE`` vector field (``M``,
``EF_CONSTRUCTION``, ``EPSILON``) and the KNN query with its params (``EF_RUNTIME``); and the way
back (:func:`from_native`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.portable import (
    Flat,
    Hnsw,
    Portable,
    Rebuilt,
    cannot_express,
    dim_is,
    ef_at_least_k,
    metric_is,
)
from retrieval.params import Params, validate_params

REDIS_FIELD = "embedding"


class RedisVectorAttributes(Params):
    TYPE: Literal["FLOAT32", "FLOAT16"] = "FLOAT32"
    DIM: int = Field(ge=1)
    DISTANCE_METRIC: Literal["L2", "IP", "COSINE"]
    M: int | None = Field(None, ge=2, le=1024)
    EF_CONSTRUCTION: int | None = Field(None, ge=1, le=16384)
    EPSILON: float | None = Field(None, gt=0.0, le=1.0)


class RedisVectorField(Params):
    name: str = Field(min_length=1)
    algorithm: Literal["HNSW", "FLAT"]
    attributes: RedisVectorAttributes


class RedisQueryParams(Params):
    EF_RUNTIME: int | None = Field(None, ge=1, le=4096)


class RedisConfig(Params):
    """``FT.CREATE`` (as one command line and as its vector field) plus the KNN query and its
    params; ``ft_create``, ``query`` and ``ft_search`` must be what the structured fields say.
    ``dialect``: the query dialect a vector query needs (2; Redis still defaults to 1), sent as
    ``FT.SEARCH ... DIALECT 2`` (``ft_search``; redis-py: ``Query(...).dialect(2)``). Files
    written before ``dialect``/``ft_search`` existed still verify."""

    ft_create: str
    vector_field: RedisVectorField
    query: str
    query_params: RedisQueryParams
    dialect: Literal[2] | None = None
    ft_search: str | None = None


def redis_strings(field: Mapping[str, Any], k: int) -> tuple[str, str]:
    """The ``FT.CREATE`` line and the KNN query of a vector field (structured form)."""
    attrs = {a: v for a, v in dict(field["attributes"]).items() if v is not None}
    flat = " ".join(f"{a} {v}" for a, v in attrs.items())
    create = (f"FT.CREATE idx ON HASH PREFIX 1 doc: SCHEMA {field['name']} VECTOR "
              f"{field['algorithm']} {2 * len(attrs)} {flat}")
    ef = " EF_RUNTIME $EF_RUNTIME" if field["algorithm"] == "HNSW" else ""
    return create, f"*=>[KNN {k} @{field['name']} $vec{ef} AS score]"


def redis_search_line(query: str, params: Mapping[str, Any], k: int) -> str:
    """The ``FT.SEARCH`` command of the KNN query (``$vec`` is the query vector's FLOAT32 bytes;
    ``DIALECT 2``: vector queries need it)."""
    values = {"vec": "$BLOB", **{n: v for n, v in params.items() if v is not None}}
    flat = " ".join(f"{n} {v}" for n, v in values.items())
    return (f'FT.SEARCH idx "{query}" PARAMS {2 * len(values)} {flat} SORTBY score '
            f"LIMIT 0 {k} DIALECT 2")


def to_redis(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    from retrieval.engines.redis.index import METRIC, RedisBuild

    attrs: dict[str, Any] = {"TYPE": "FLOAT32", "DIM": dim, "DISTANCE_METRIC": METRIC[metric]}
    if isinstance(p, Hnsw):
        if p.quantization == "FP16":
            attrs["TYPE"] = "FLOAT16"
        elif p.quantization:
            raise cannot_express("redis", p, "Redis vector fields are FLOAT32 or FLOAT16 here "
                                 f"(no {p.quantization} quantization)")
        if p.ef_search < k:
            raise param_error("query_params.EF_RUNTIME", f">= k ({k})", p.ef_search,
                              where="redis export")
        eps = p.native_for("redis").get("EPSILON", RedisBuild().EPSILON)
        attrs.update(M=p.M, EF_CONSTRUCTION=p.ef_construction, EPSILON=eps)
        algorithm, params = "HNSW", {"EF_RUNTIME": p.ef_search}
    elif isinstance(p, Flat):
        algorithm, params = "FLAT", {}
    else:
        raise cannot_express("redis", p, "Redis vector fields are HNSW or FLAT")
    field = {"name": REDIS_FIELD, "algorithm": algorithm, "attributes": attrs}
    create, query = redis_strings(field, k)
    doc = {"ft_create": create, "vector_field": field, "query": query, "query_params": params,
           "dialect": 2, "ft_search": redis_search_line(query, params, k)}
    return validate_params(RedisConfig, doc, where="redis export").model_dump(exclude_none=True)


def from_redis(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    from retrieval.engines.redis.index import METRIC

    c = validate_params(RedisConfig, cfg, where=where, prefix="config.")
    a = c.vector_field.attributes
    metric_is(a.DISTANCE_METRIC, metric, "vector_field.attributes.DISTANCE_METRIC", METRIC,
               where)
    dim_is(a.DIM, dim, "vector_field.attributes.DIM", where)
    create, query = redis_strings(c.vector_field.model_dump(), k)
    if " ".join(c.ft_create.split()) != create:
        raise param_error("config.ft_create", f"the command vector_field describes ('{create}')",
                          c.ft_create, where=where)
    if " ".join(c.query.split()) != query:
        raise param_error("config.query", f"'{query}' (k {k}, as vector_field says)", c.query,
                          where=where)
    if c.query_params.EF_RUNTIME is not None:
        ef_at_least_k(c.query_params.EF_RUNTIME, k, "query_params.EF_RUNTIME", where)
    if c.ft_search is not None:
        line = redis_search_line(query, c.query_params.model_dump(), k)
        if " ".join(c.ft_search.split()) != line:
            raise param_error("config.ft_search", f"'{line}' (as query and query_params say)",
                              c.ft_search, where=where)
    if c.vector_field.algorithm == "FLAT":
        return Rebuilt("redis", {"algorithm": "FLAT"}, {})
    build: dict[str, Any] = {"algorithm": "HNSW"}
    if a.TYPE != "FLOAT32":
        build["TYPE"] = a.TYPE
    for name in ("M", "EF_CONSTRUCTION", "EPSILON"):
        value = getattr(a, name)
        if value is None:
            raise ConfigError(f"{where}: field 'config.vector_field.attributes.{name}' is "
                              f"missing (HNSW)")
        build[name] = value
    if c.query_params.EF_RUNTIME is None:
        raise ConfigError(f"{where}: field 'config.query_params.EF_RUNTIME' is missing (HNSW)")
    ef_at_least_k(c.query_params.EF_RUNTIME, k, "query_params.EF_RUNTIME", where)
    return Rebuilt("redis", build, {"EF_RUNTIME": c.query_params.EF_RUNTIME})


to_native = to_redis
from_native = from_redis


#: search params of a Redis hybrid query, carried beside its filter form
REDIS_HYBRID = ("HYBRID_POLICY", "BATCH_SIZE")


def filter_knobs(search: dict[str, Any], given: Mapping[str, Any]) -> Any:
    """A Redis hybrid query's policy params, carried as the entry's ``hybrid_query``."""
    hybrid = {p: v for p, v in given.items() if p in REDIS_HYBRID and v is not None}
    if not hybrid:
        return None

    def apply(native: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return native, {"hybrid_query": hybrid}

    return apply
