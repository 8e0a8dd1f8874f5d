"""Milvus in its own names: ``index_type``, ``metric_type``, ``params`` (build) and
``search_params`` (``{"metric_type", "params": {"ef"|"nprobe"}}``), checked by rwb's Milvus models
(HNSW M in [2, 2048], ef in [k, 32768]; IVF nlist in [1, 65536], nprobe in [1, nlist]); and the
way back (:func:`from_native`). rwb l2 (squared) = Milvus L2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.portable import (
    Flat,
    Hnsw,
    Ivf,
    Portable,
    Rebuilt,
    cannot_express,
    metric_is,
)
from retrieval.params import validate_params

_MILVUS_METRIC = {"l2": "L2", "ip": "IP", "cosine": "COSINE"}


def to_milvus(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    from retrieval.engines.milvus.params import MilvusBuild, search_model_for

    if isinstance(p, Hnsw):
        if p.quantization not in (None, "SQ8"):
            raise cannot_express("milvus", p, f"HNSW with {p.quantization} quantization has no "
                          f"Milvus index type rwb can run (HNSW, HNSW_SQ)")
        kind = "HNSW_SQ" if p.quantization == "SQ8" else "HNSW"
        build: dict[str, Any] = {"M": p.M, "efConstruction": p.ef_construction}
        if kind == "HNSW_SQ":
            build["sq_type"] = "SQ8"
        search: dict[str, Any] = {"ef": p.ef_search}
    elif isinstance(p, Ivf):
        if p.encoding not in ("flat", "sq8") or p.refine:
            raise cannot_express("milvus", p, "only IVF_FLAT and IVF_SQ8 (no PQ, no refine) are "
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


def from_milvus(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    from retrieval.engines.milvus.params import MilvusBuild, search_model_for

    for key in ("index_type", "metric_type", "params", "search_params"):
        if key not in cfg:
            raise ConfigError(f"{where}: field 'config.{key}' is missing")
    metric_is(str(cfg["metric_type"]), metric, "metric_type", _MILVUS_METRIC, where)
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


to_native = to_milvus
from_native = from_milvus
