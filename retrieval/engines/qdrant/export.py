"""Qdrant in its own names (REST), in three labelled parts:

- ``create_collection``: the body of ``PUT /collections/{name}`` (qdrant-client
  ``create_collection(vectors_config=..., hnsw_config=..., quantization_config=...)``) with
  production values: ``vectors``, ``hnsw_config`` (``m``, ``ef_construct`` >= 4) and
  ``quantization_config``; the optimizer thresholds are left to Qdrant's defaults unless the
  tuning set them to other values than rwb's measurement settings;
- ``search``: what goes with each query, ``search.params`` = ``SearchParams`` (``hnsw_ef``,
  ``quantization.rescore`` / ``oversampling``, ``acorn``), not part of a collection body;
- ``measurement_settings``: the benchmark harness's ``full_scan_threshold: 1``,
  ``indexing_threshold: 1``, ``default_segment_number: 1`` (they force the HNSW graph on a small
  collection, and would hurt a production one): what was measured, read back by ``rwb verify``.

:func:`from_native` rebuilds exactly what was measured from ``create_collection`` + ``search`` +
``measurement_settings``, and still reads the older single-block form (``vectors``,
``hnsw_config``, ``optimizers_config``, ``search_params``). Qdrant 'Euclid' is the (unsquared)
Euclidean distance, which ranks as rwb's squared l2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.errors import param_error
from retrieval.indexes.portable import (
    Hnsw,
    Portable,
    Rebuilt,
    cannot_express,
    dim_is,
    ef_at_least_k,
    metric_is,
)
from retrieval.params import Params, validate_params


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
    """The older single-block export (still read): a Qdrant collection config with the
    measurement thresholds inside, plus the search ``params`` it was measured with."""

    vectors: QdrantVectors
    hnsw_config: QdrantHnsw
    optimizers_config: QdrantOptimizers
    quantization_config: QdrantQuantization | None = None
    search_params: QdrantSearch


class ProdHnsw(Params):
    m: int = Field(ge=2, le=256)
    ef_construct: int = Field(ge=4, le=16384)
    full_scan_threshold: int | None = Field(None, ge=1)
    on_disk: bool = False


class ProdOptimizers(Params):
    indexing_threshold: int | None = Field(None, ge=1)


class CreateCollection(Params):
    vectors: QdrantVectors
    hnsw_config: ProdHnsw
    optimizers_config: ProdOptimizers | None = None
    quantization_config: QdrantQuantization | None = None


class SearchBlock(Params):
    params: QdrantSearch


class MeasuredHnsw(Params):
    full_scan_threshold: int = Field(ge=1)


class MeasurementSettings(Params):
    note: str = ""
    hnsw_config: MeasuredHnsw
    optimizers_config: QdrantOptimizers


class QdrantExport(Params):
    """``create_collection`` (production body) + ``search`` (per-query params) +
    ``measurement_settings`` (what the harness measured with; see the module doc)."""

    create_collection: CreateCollection
    search: SearchBlock
    measurement_settings: MeasurementSettings


#: rwb's measurement value of both thresholds (QdrantBuild's default): forces the HNSW graph
MEASURE_THRESHOLD = 1
MEASUREMENT_NOTE = ("benchmark-harness settings rwb measured with (HNSW forced on a small "
                    "collection); not for production: rwb verify reads them to rebuild the "
                    "measurement")


def to_qdrant(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    """The three-part export of the module doc: production collection body, search params and
    the labelled measurement settings (Qdrant's own thresholds, 10000 KB, leave a collection
    under ~10 MB of vectors unindexed: rwb measures with 1 so every hnsw_ef is a graph walk)."""
    from retrieval.engines.qdrant.params import QdrantBuild
    from retrieval.engines.qdrant.params import QdrantSearch as Knobs

    if not isinstance(p, Hnsw):
        raise cannot_express("qdrant", p, "qdrant export takes HNSW results")
    if p.ef_search < k:
        raise param_error("search_params.hnsw_ef", f">= k ({k})", p.ef_search,
                          where="qdrant export")
    native = p.native_for("qdrant")
    quant = {None: "none", "SQ8": "scalar", "BQ": "binary", "PQ": "product"}.get(p.quantization)
    if quant is None:
        raise cannot_express("qdrant", p, f"Qdrant has no {p.quantization} storage here "
                             "(scalar int8, binary or product quantization)")
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
    legacy = validate_params(QdrantConfig, doc, where="qdrant export").model_dump(
        exclude_none=True)
    return validate_params(QdrantExport, split_legacy(legacy), where="qdrant export").model_dump(
        exclude_none=True)


def split_legacy(legacy: Mapping[str, Any]) -> dict[str, Any]:
    """The three-part form of a single-block config: thresholds rwb set only to measure move to
    ``measurement_settings``; a threshold the tuning set to another value stays in the body."""
    hnsw = dict(legacy["hnsw_config"])
    opt = dict(legacy["optimizers_config"])
    body_hnsw = {k: v for k, v in hnsw.items() if k != "full_scan_threshold"}
    if hnsw["full_scan_threshold"] != MEASURE_THRESHOLD:
        body_hnsw["full_scan_threshold"] = hnsw["full_scan_threshold"]
    body: dict[str, Any] = {"vectors": legacy["vectors"], "hnsw_config": body_hnsw}
    if opt["indexing_threshold"] != MEASURE_THRESHOLD:
        body["optimizers_config"] = {"indexing_threshold": opt["indexing_threshold"]}
    if legacy.get("quantization_config") is not None:
        body["quantization_config"] = legacy["quantization_config"]
    return {
        "create_collection": body,
        "search": {"params": legacy["search_params"]},
        "measurement_settings": {
            "note": MEASUREMENT_NOTE,
            "hnsw_config": {"full_scan_threshold": hnsw["full_scan_threshold"]},
            "optimizers_config": {"indexing_threshold": opt["indexing_threshold"],
                                  "default_segment_number": opt.get("default_segment_number",
                                                                    1)},
        },
    }


def join_parts(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The single-block form of what was measured: the three-part export read back (the
    measurement settings win: they are what ran), or an older single-block file as is."""
    if "create_collection" not in cfg:
        return dict(cfg)
    e = validate_params(QdrantExport, cfg, where=where, prefix="config.")
    body, ms = e.create_collection, e.measurement_settings
    for field, prod, measured in (
            ("create_collection.hnsw_config.full_scan_threshold",
             body.hnsw_config.full_scan_threshold, ms.hnsw_config.full_scan_threshold),
            ("create_collection.optimizers_config.indexing_threshold",
             body.optimizers_config.indexing_threshold if body.optimizers_config else None,
             ms.optimizers_config.indexing_threshold)):
        if prod is not None and prod != measured:
            raise param_error(f"config.{field}", f"absent (Qdrant's default) or equal to "
                              f"measurement_settings ({measured}): the tuning measured that",
                              prod, where=where)
    legacy: dict[str, Any] = {
        "vectors": body.vectors.model_dump(),
        "hnsw_config": {**body.hnsw_config.model_dump(exclude_none=True),
                        "full_scan_threshold": ms.hnsw_config.full_scan_threshold},
        "optimizers_config": ms.optimizers_config.model_dump(),
        "search_params": e.search.params.model_dump(exclude_none=True),
    }
    if body.quantization_config is not None:
        legacy["quantization_config"] = body.quantization_config.model_dump(exclude_none=True)
    return legacy


def from_qdrant(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    c = validate_params(QdrantConfig, join_parts(cfg, where), where=where, prefix="config.")
    metric_is(c.vectors.distance, metric, "vectors.distance",
               {"l2": "Euclid", "ip": "Dot", "cosine": "Cosine"}, where)
    dim_is(c.vectors.size, dim, "vectors.size", where)
    ef_at_least_k(c.search_params.hnsw_ef, k, "search_params.hnsw_ef", where)
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


to_native = to_qdrant
from_native = from_qdrant


def filter_knobs(search: dict[str, Any], given: Mapping[str, Any]) -> Any:
    """Qdrant's ACORN filtered walk (no neutral form), exported in Qdrant's REST names,
    ``search_params.acorn = {"enable": true, "max_selectivity": x}``."""
    if not search.get("acorn"):
        return None
    acorn: dict[str, Any] = {"enable": True}
    if search.get("acorn_max_selectivity") is not None:
        acorn["max_selectivity"] = float(search["acorn_max_selectivity"])
    search["acorn"] = False
    search.pop("acorn_max_selectivity", None)

    def apply(native: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        native["search"]["params"]["acorn"] = acorn
        doc = validate_params(QdrantExport, native, where="qdrant export").model_dump(
            exclude_none=True)
        return doc, {}

    return apply
