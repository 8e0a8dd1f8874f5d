"""Engine-native configs: each engine's own parameter names, validated against its own rules.

- ``milvus``: ``index_type``, ``metric_type``, ``params`` (build) and ``search_params``
  (``{"metric_type", "params": {"ef"|"nprobe"}}``), checked by rwb's Milvus models (Milvus's
  documented ranges: HNSW M in [2, 2048], ef in [k, 32768]; IVF nlist in [1, 65536], nprobe in
  [1, nlist]);
- ``faiss``: an ``index_factory`` string and a ``ParameterSpace`` string, checked by building the
  (untrained) index with Faiss and applying the string to it;
- ``hnswlib``: ``space``, ``dim``, ``M``, ``ef_construction``, ``ef``;
- ``qdrant`` (HNSW, with scalar / binary / product quantization): collection ``vectors`` +
  ``hnsw_config`` (``m``, ``ef_construct`` >= 4, ``full_scan_threshold``) + ``optimizers_config``
  (``indexing_threshold``) + ``quantization_config``, and search ``params`` (``hnsw_ef``,
  ``quantization.rescore`` / ``oversampling``);
- ``redis`` (HNSW or FLAT): the ``FT.CREATE`` vector field (``M``, ``EF_CONSTRUCTION``,
  ``EPSILON``) and the KNN query with its params (``EF_RUNTIME``);
- ``pgvector``: ``CREATE INDEX ... USING hnsw|ivfflat ... WITH (...)`` + ``SET`` lines, see
  :mod:`retrieval.export.engine_pgvector` (and its inverse ``from_pgvector``);
- ``weaviate`` (HNSW only): ``vectorIndexType: hnsw`` + ``vectorIndexConfig``
  (``maxConnections``, ``efConstruction``, ``ef``, ``distance``).

Distances: rwb l2 (squared) = Milvus L2 = Faiss METRIC_L2 = hnswlib 'l2' = Weaviate l2-squared;
Qdrant 'Euclid' is the (unsquared) Euclidean distance, which ranks identically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.errors import ConfigError, param_error
from retrieval.export.engine_pgvector import to_pgvector
from retrieval.indexes.portable import Auto, Flat, Hnsw, Ivf, Portable
from retrieval.params import Params, validate_params


def own_backends(engine: str) -> tuple[str, ...]:
    """The rwb backends that run ``engine``'s own library (preferred as the source of an
    export): each exportable backend names its engine (``export_engine``)."""
    from retrieval.indexes.base import SupportsPortable
    from retrieval.indexes.registry import all_backends

    return tuple(name for name, cls in all_backends().items()
                 if isinstance(cls, SupportsPortable) and cls.export_engine == engine)


def _cannot(engine: str, p: Portable, why: str) -> ConfigError:
    return ConfigError(f"engine '{engine}' cannot express this config ({type(p).__name__}): {why}")


# --- milvus -------------------------------------------------------------------------------------
_MILVUS_METRIC = {"l2": "L2", "ip": "IP", "cosine": "COSINE"}


def to_milvus(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    from retrieval.indexes._milvus_params import MilvusBuild, search_model_for

    if isinstance(p, Hnsw):
        if p.quantization not in (None, "SQ8"):
            raise _cannot("milvus", p, f"HNSW with {p.quantization} quantization has no "
                          f"Milvus index type rwb can run (HNSW, HNSW_SQ)")
        kind = "HNSW_SQ" if p.quantization == "SQ8" else "HNSW"
        build: dict[str, Any] = {"M": p.M, "efConstruction": p.ef_construction}
        if kind == "HNSW_SQ":
            build["sq_type"] = "SQ8"
        search: dict[str, Any] = {"ef": p.ef_search}
    elif isinstance(p, Ivf):
        if p.encoding not in ("flat", "sq8") or p.refine:
            raise _cannot("milvus", p, "only IVF_FLAT and IVF_SQ8 (no PQ, no refine) are "
                          "supported by rwb's Milvus backend, so rwb cannot verify it")
        kind = "IVF_SQ8" if p.encoding == "sq8" else "IVF_FLAT"
        build, search = {"nlist": p.nlist}, {"nprobe": p.nprobe}
    elif isinstance(p, Flat):
        kind, build, search = "FLAT", {}, {}
    else:
        kind, build, search = "AUTOINDEX", {}, {}
    where = "milvus export"
    model = validate_params(MilvusBuild, {"index_type": kind, **build}, where=where,
                            prefix="params.")
    sp = validate_params(search_model_for(model), search, where=where, prefix="search_params.")
    ef = getattr(sp, "ef", None)
    if ef is not None and ef < k:
        raise param_error("search_params.params.ef", f">= k ({k})", ef, where=where)
    nprobe = getattr(sp, "nprobe", None)
    if nprobe is not None and nprobe > build.get("nlist", nprobe):
        raise param_error("search_params.params.nprobe", f"<= nlist ({build['nlist']})", nprobe,
                          where=where)
    mt = _MILVUS_METRIC[metric]
    return {
        "index_type": kind,
        "metric_type": mt,
        "params": build,
        "search_params": {"metric_type": mt, "params": search},
    }


# --- faiss --------------------------------------------------------------------------------------
class FaissConfig(Params):
    index_factory: str = Field(min_length=1)
    metric: Literal["METRIC_L2", "METRIC_INNER_PRODUCT"]
    normalize_vectors: bool
    dim: int = Field(ge=1)
    parameter_space: str
    index_fields: dict[str, int] = Field(default_factory=dict)


def to_faiss(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    fields: dict[str, int] = {}
    if isinstance(p, Hnsw):
        if p.quantization:
            raise _cannot("faiss", p, "HNSW over SQ8 is not exported to Faiss by rwb")
        if p.ef_search < k:
            raise param_error("efSearch", f">= k ({k})", p.ef_search, where="faiss export")
        factory, space = f"HNSW{p.M}", f"efSearch={p.ef_search}"
        fields["hnsw.efConstruction"] = p.ef_construction
    elif isinstance(p, Ivf):
        code = {"flat": "Flat", "sq8": "SQ8"}.get(p.encoding) or f"PQ{p.pq_m}x{p.pq_nbits}np"
        factory = f"IVF{p.nlist},{code}" + (",RFlat" if p.refine else "")
        space = f"nprobe={p.nprobe}" + (f",k_factor_rf={p.k_factor}" if p.refine else "")
    elif isinstance(p, Flat):
        factory, space = "Flat", ""
    else:
        raise _cannot("faiss", p, "AUTOINDEX lets Milvus choose; there is no Faiss equivalent")
    doc = {
        "index_factory": factory,
        "metric": "METRIC_L2" if metric == "l2" else "METRIC_INNER_PRODUCT",
        "normalize_vectors": metric == "cosine",
        "dim": dim,
        "parameter_space": space,
        "index_fields": fields,
    }
    check_faiss(doc)
    return doc


def check_faiss(doc: dict[str, Any]) -> None:
    """Faiss itself parses the factory string and applies the ParameterSpace string."""
    import faiss

    cfg = validate_params(FaissConfig, doc, where="faiss export")
    metric = getattr(faiss, cfg.metric)
    try:
        index = faiss.index_factory(cfg.dim, cfg.index_factory, metric)
    except RuntimeError as exc:
        raise ConfigError(f"faiss export: index_factory '{cfg.index_factory}' is rejected by "
                          f"Faiss: {str(exc).splitlines()[-1]}") from None
    if cfg.parameter_space:
        try:
            space: Any = faiss.ParameterSpace()  # (its stubs only know the numeric overload)
            space.set_index_parameters(index, cfg.parameter_space)
        except RuntimeError as exc:
            raise ConfigError(f"faiss export: parameter_space '{cfg.parameter_space}' is "
                              f"rejected by Faiss: {str(exc).splitlines()[-1]}") from None


# --- hnswlib ------------------------------------------------------------------------------------
class HnswlibConfig(Params):
    space: Literal["l2", "ip", "cosine"]
    dim: int = Field(ge=1)
    M: int = Field(ge=2, le=2048)
    ef_construction: int = Field(ge=1)
    ef: int = Field(ge=1)


def _hnsw_only(engine: str, p: Portable) -> Hnsw:
    if not isinstance(p, Hnsw) or p.quantization:
        raise _cannot(engine, p, f"{engine} export takes HNSW results (without quantization)")
    return p


def to_hnswlib(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    h = _hnsw_only("hnswlib", p)
    if h.ef_search < k:
        raise param_error("ef", f">= k ({k}); hnswlib silently uses max(ef, k)", h.ef_search,
                          where="hnswlib export")
    doc = {"space": metric, "dim": dim, "M": h.M, "ef_construction": h.ef_construction,
           "ef": h.ef_search}
    return validate_params(HnswlibConfig, doc, where="hnswlib export").model_dump()


# --- qdrant -------------------------------------------------------------------------------------
class QdrantVectors(Params):
    size: int = Field(ge=1, le=65536)
    distance: Literal["Cosine", "Euclid", "Dot"]
    on_disk: bool = False


class QdrantHnsw(Params):
    m: int = Field(ge=2, le=256)
    ef_construct: int = Field(ge=4, le=16384)
    full_scan_threshold: int = Field(ge=1)
    on_disk: bool = False


class QdrantOptimizers(Params):
    indexing_threshold: int = Field(ge=1)
    default_segment_number: int = Field(1, ge=1)


class QdrantQuantSearch(Params):
    rescore: bool = True
    oversampling: float = Field(1.0, ge=1.0, le=64.0)


class QdrantAcorn(Params):
    """``SearchParams.acorn``: the ACORN filtered walk (filtered searches only)."""

    enable: bool = True
    max_selectivity: float | None = Field(None, gt=0.0, le=1.0)


class QdrantSearch(Params):
    hnsw_ef: int = Field(ge=1, le=4096)
    exact: Literal[False] = False
    quantization: QdrantQuantSearch | None = None
    acorn: QdrantAcorn | None = None


class QdrantScalar(Params):
    type: Literal["int8"] = "int8"
    quantile: float | None = Field(None, gt=0.5, le=1.0)
    always_ram: bool = True


class QdrantBinary(Params):
    always_ram: bool = True


class QdrantProduct(Params):
    compression: Literal["x4", "x8", "x16", "x32", "x64"] = "x8"
    always_ram: bool = True


class QdrantQuantization(Params):
    scalar: QdrantScalar | None = None
    binary: QdrantBinary | None = None
    product: QdrantProduct | None = None


class QdrantConfig(Params):
    """A Qdrant collection config (REST names) plus the search ``params`` it was measured with."""

    vectors: QdrantVectors
    hnsw_config: QdrantHnsw
    optimizers_config: QdrantOptimizers
    quantization_config: QdrantQuantization | None = None
    search_params: QdrantSearch


def to_qdrant(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    """Collection config with the optimizer thresholds rwb measured with (Qdrant's defaults,
    10000 KB, leave a collection under ~10 MB of vectors unindexed: every hnsw_ef would then
    be a brute force) and the search params."""
    from retrieval.indexes._qdrant_params import QdrantBuild
    from retrieval.indexes._qdrant_params import QdrantSearch as Knobs

    if not isinstance(p, Hnsw):
        raise _cannot("qdrant", p, "qdrant export takes HNSW results")
    if p.ef_search < k:
        raise param_error("search_params.hnsw_ef", f">= k ({k})", p.ef_search,
                          where="qdrant export")
    native = p.native_for("qdrant")
    quant = {None: "none", "SQ8": "scalar", "BQ": "binary", "PQ": "product"}[p.quantization]
    b = validate_params(QdrantBuild, {
        "m": p.M, "ef_construct": p.ef_construction, "quantization": quant,
        **{k_: v for k_, v in native.items() if k_ in QdrantBuild.model_fields}},
        where="qdrant export", prefix="hnsw_config.")
    sk = validate_params(Knobs, {
        "hnsw_ef": p.ef_search,
        **{k_: v for k_, v in native.items() if k_ in Knobs.model_fields}},
        where="qdrant export", prefix="search_params.")
    q: dict[str, Any] | None = None
    if quant == "scalar":
        q = {"scalar": {"type": "int8", "quantile": b.quantile, "always_ram": b.always_ram}}
    elif quant == "binary":
        q = {"binary": {"always_ram": b.always_ram}}
    elif quant == "product":
        q = {"product": {"compression": b.pq_compression, "always_ram": b.always_ram}}
    doc: dict[str, Any] = {
        "vectors": {"size": dim, "distance": {"l2": "Euclid", "ip": "Dot",
                                              "cosine": "Cosine"}[metric], "on_disk": b.on_disk},
        "hnsw_config": {"m": b.m, "ef_construct": b.ef_construct,
                        "full_scan_threshold": b.full_scan_threshold, "on_disk": b.on_disk},
        "optimizers_config": {"indexing_threshold": b.indexing_threshold,
                              "default_segment_number": 1},
        "search_params": {"hnsw_ef": sk.hnsw_ef, "exact": False},
    }
    if q is not None:
        doc["quantization_config"] = q
        doc["search_params"]["quantization"] = {"rescore": sk.rescore,
                                                "oversampling": sk.oversampling}
    return validate_params(QdrantConfig, doc, where="qdrant export").model_dump(
        exclude_none=True)


# --- redis --------------------------------------------------------------------------------------
REDIS_FIELD = "embedding"


class RedisVectorAttributes(Params):
    TYPE: Literal["FLOAT32"] = "FLOAT32"
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
    params; ``ft_create`` and ``query`` must be what the structured fields say."""

    ft_create: str
    vector_field: RedisVectorField
    query: str
    query_params: RedisQueryParams


def redis_strings(field: Mapping[str, Any], k: int) -> tuple[str, str]:
    """The ``FT.CREATE`` line and the KNN query of a vector field (structured form)."""
    attrs = {a: v for a, v in dict(field["attributes"]).items() if v is not None}
    flat = " ".join(f"{a} {v}" for a, v in attrs.items())
    create = (f"FT.CREATE idx ON HASH PREFIX 1 doc: SCHEMA {field['name']} VECTOR "
              f"{field['algorithm']} {2 * len(attrs)} {flat}")
    ef = " EF_RUNTIME $EF_RUNTIME" if field["algorithm"] == "HNSW" else ""
    return create, f"*=>[KNN {k} @{field['name']} $vec{ef} AS score]"


def to_redis(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    from retrieval.indexes.redis_index import METRIC, RedisBuild

    attrs: dict[str, Any] = {"TYPE": "FLOAT32", "DIM": dim, "DISTANCE_METRIC": METRIC[metric]}
    if isinstance(p, Hnsw):
        if p.quantization:
            raise _cannot("redis", p, "Redis vector fields are FLOAT32 here (no quantization)")
        if p.ef_search < k:
            raise param_error("query_params.EF_RUNTIME", f">= k ({k})", p.ef_search,
                              where="redis export")
        eps = p.native_for("redis").get("EPSILON", RedisBuild().EPSILON)
        attrs.update(M=p.M, EF_CONSTRUCTION=p.ef_construction, EPSILON=eps)
        algorithm, params = "HNSW", {"EF_RUNTIME": p.ef_search}
    elif isinstance(p, Flat):
        algorithm, params = "FLAT", {}
    else:
        raise _cannot("redis", p, "Redis vector fields are HNSW or FLAT")
    field = {"name": REDIS_FIELD, "algorithm": algorithm, "attributes": attrs}
    create, query = redis_strings(field, k)
    doc = {"ft_create": create, "vector_field": field, "query": query, "query_params": params}
    return validate_params(RedisConfig, doc, where="redis export").model_dump(exclude_none=True)


# --- weaviate -----------------------------------------------------------------------------------
class WeaviateIndexConfig(Params):
    maxConnections: int = Field(ge=1)
    efConstruction: int = Field(ge=1)
    ef: int = Field(ge=1)
    distance: Literal["cosine", "dot", "l2-squared"]


class WeaviateConfig(Params):
    vectorIndexType: Literal["hnsw"]
    vectorIndexConfig: WeaviateIndexConfig


def to_weaviate(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    h = _hnsw_only("weaviate", p)
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


TRANSLATORS: dict[str, Callable[[Portable, str, int, int], dict[str, Any]]] = {
    "milvus": to_milvus,
    "faiss": to_faiss,
    "hnswlib": to_hnswlib,
    "qdrant": to_qdrant,
    "pgvector": to_pgvector,
    "redis": to_redis,
    "weaviate": to_weaviate,
}


#: the ANN engines (the sweep exporter's keys in :mod:`retrieval.export.registry`)
ANN_ENGINES: tuple[str, ...] = tuple(TRANSLATORS)


def translate(engine: str, p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    """The engine-native config of ``p`` (ConfigError when the engine cannot express it)."""
    if isinstance(p, Auto) and engine != "milvus":
        raise _cannot(engine, p, "AUTOINDEX lets Milvus choose; only Milvus can take it")
    return TRANSLATORS[engine](p, metric, dim, k)
