"""Engine-native configs: each engine's own parameter names, validated against its own rules.

- ``milvus``: ``index_type``, ``metric_type``, ``params`` (build) and ``search_params``
  (``{"metric_type", "params": {"ef"|"nprobe"}}``), checked by rwb's Milvus models (Milvus's
  documented ranges: HNSW M in [2, 2048], ef in [k, 32768]; IVF nlist in [1, 65536], nprobe in
  [1, nlist]);
- ``faiss``: an ``index_factory`` string and a ``ParameterSpace`` string, checked by building the
  (untrained) index with Faiss and applying the string to it;
- ``hnswlib``: ``space``, ``dim``, ``M``, ``ef_construction``, ``ef``;
- ``qdrant`` (HNSW only): collection ``vectors`` + ``hnsw_config`` (``m``, ``ef_construct`` >= 4)
  and search ``params`` (``hnsw_ef``);
- ``pgvector``: ``CREATE INDEX ... USING hnsw|ivfflat ... WITH (...)`` + ``SET`` lines, see
  :mod:`retrieval.export.engine_pgvector` (and its inverse ``from_pgvector``);
- ``weaviate`` (HNSW only): ``vectorIndexType: hnsw`` + ``vectorIndexConfig``
  (``maxConnections``, ``efConstruction``, ``ef``, ``distance``).

Distances: rwb l2 (squared) = Milvus L2 = Faiss METRIC_L2 = hnswlib 'l2' = Weaviate l2-squared;
Qdrant 'Euclid' is the (unsquared) Euclidean distance, which ranks identically.
"""

from __future__ import annotations

from collections.abc import Callable
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
    size: int = Field(ge=1)
    distance: Literal["Cosine", "Euclid", "Dot"]


class QdrantHnsw(Params):
    m: int = Field(ge=0)
    ef_construct: int = Field(ge=4)


class QdrantSearch(Params):
    hnsw_ef: int = Field(ge=1)
    exact: bool = False


class QdrantConfig(Params):
    vectors: QdrantVectors
    hnsw_config: QdrantHnsw
    search_params: QdrantSearch


def to_qdrant(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    h = _hnsw_only("qdrant", p)
    if h.ef_search < k:
        raise param_error("search_params.hnsw_ef", f">= k ({k})", h.ef_search,
                          where="qdrant export")
    distance = {"l2": "Euclid", "ip": "Dot", "cosine": "Cosine"}[metric]
    doc = {
        "vectors": {"size": dim, "distance": distance},
        "hnsw_config": {"m": h.M, "ef_construct": h.ef_construction},
        "search_params": {"hnsw_ef": h.ef_search, "exact": False},
    }
    return validate_params(QdrantConfig, doc, where="qdrant export").model_dump()


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
    "weaviate": to_weaviate,
}


#: the ANN engines (the sweep exporter's keys in :mod:`retrieval.export.registry`)
ANN_ENGINES: tuple[str, ...] = tuple(TRANSLATORS)


def translate(engine: str, p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    """The engine-native config of ``p`` (ConfigError when the engine cannot express it)."""
    if isinstance(p, Auto) and engine != "milvus":
        raise _cannot(engine, p, "AUTOINDEX lets Milvus choose; only Milvus can take it")
    return TRANSLATORS[engine](p, metric, dim, k)
