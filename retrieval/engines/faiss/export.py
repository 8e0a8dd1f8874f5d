"""Faiss in its own names: an ``index_factory`` string and a ``ParameterSpace`` string, checked
by building the (untrained) index with Faiss and applying the string to it; and the way back
(:func:`from_native`). rwb l2 (squared) = Faiss METRIC_L2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.engines.faiss.ivf import ENCODING_CODES
from retrieval.errors import ConfigError, param_error
from retrieval.indexes.portable import (
    Flat,
    Hnsw,
    Ivf,
    Portable,
    Rebuilt,
    cannot_express,
    dim_is,
)
from retrieval.params import Params, validate_params


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
            raise cannot_express("faiss", p, "HNSW over SQ8 is not exported to Faiss by rwb")
        if p.ef_search < k:
            raise param_error("efSearch", f">= k ({k})", p.ef_search, where="faiss export")
        factory, space = f"HNSW{p.M}", f"efSearch={p.ef_search}"
        fields["hnsw.efConstruction"] = p.ef_construction
    elif isinstance(p, Ivf):
        code = ENCODING_CODES.get(p.encoding) or f"PQ{p.pq_m}x{p.pq_nbits}np"
        factory = f"IVF{p.nlist},{code}" + (",RFlat" if p.refine else "")
        space = f"nprobe={p.nprobe}" + (f",k_factor_rf={p.k_factor}" if p.refine else "")
    elif isinstance(p, Flat):
        factory, space = "Flat", ""
    else:
        raise cannot_express("faiss", p, "AUTOINDEX lets Milvus choose; there is no Faiss "
                             "equivalent")
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


def from_faiss(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:

    c = validate_params(FaissConfig, cfg, where=where, prefix="config.")
    dim_is(c.dim, dim, "dim", where)
    want = "METRIC_L2" if metric == "l2" else "METRIC_INNER_PRODUCT"
    if c.metric != want or c.normalize_vectors != (metric == "cosine"):
        raise param_error("config.metric", f"{want} with normalize_vectors "
                          f"{metric == 'cosine'} (the data's metric is {metric})",
                          f"{c.metric}, normalize_vectors {c.normalize_vectors}", where=where)
    fac = c.index_factory
    if not re.fullmatch(r"HNSW\d+|IVF\d+,(Flat|SQ8|SQ4|RaBitQ|PQ\d+x\d+np)(,RFlat)?|Flat", fac):
        raise param_error("config.index_factory", "HNSW<M>, IVF<nlist>,Flat|SQ8|SQ4|RaBitQ|"
                          "PQ<m>x<b>np[,RFlat] or Flat (what rwb's faiss backends build)", fac,
                          where=where)
    try:
        check_faiss(dict(cfg))
    except ConfigError as exc:
        raise ConfigError(f"{where}: config: {' '.join(str(exc).split())}") from None
    space = dict(re.findall(r"(\w+)=(\d+)", c.parameter_space))
    if m := re.fullmatch(r"HNSW(\d+)", fac):
        efc = c.index_fields.get("hnsw.efConstruction", 40)
        return Rebuilt("faiss-hnsw", {"M": int(m[1]), "ef_construction": int(efc)},
                       {"ef_search": int(space.get("efSearch", 16))})
    if m := re.fullmatch(r"IVF(\d+),(Flat|SQ8|SQ4|RaBitQ|PQ(\d+)x(\d+)np)(,RFlat)?", fac):
        build: dict[str, Any] = {"nlist": int(m[1])}
        if m[2] in ("SQ8", "SQ4", "RaBitQ"):
            build["encoding"] = m[2].lower()
        elif m[3]:
            build.update(encoding="pq", pq_m=int(m[3]), pq_nbits=int(m[4]))
        search: dict[str, Any] = {"nprobe": int(space.get("nprobe", 1))}
        if m[5]:
            build["refine"] = True
            search["k_factor"] = int(space.get("k_factor_rf", 1))
        return Rebuilt("faiss-ivf", build, search)
    if fac == "Flat":
        return Rebuilt("faiss-flat", {}, {})
    raise param_error("config.index_factory", "HNSW<M>, IVF<nlist>,Flat|SQ8|SQ4|RaBitQ|"
                      "PQ<m>x<b>np[,RFlat] or Flat (what rwb's faiss backends build)", fac,
                          where=where)


to_native = to_faiss
from_native = from_faiss
