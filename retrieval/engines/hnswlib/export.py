"""hnswlib in its own names: ``space``, ``dim``, ``M``, ``ef_construction``, ``ef``; and the way
back (:func:`from_native`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.errors import param_error
from retrieval.indexes.portable import (
    Portable,
    Rebuilt,
    dim_is,
    ef_at_least_k,
    hnsw_only,
    metric_is,
)
from retrieval.params import Params, validate_params


class HnswlibConfig(Params):
    space: Literal["l2", "ip", "cosine"]
    dim: int = Field(ge=1)
    M: int = Field(ge=2, le=2048)
    ef_construction: int = Field(ge=1)
    ef: int = Field(ge=1)


def to_hnswlib(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    h = hnsw_only("hnswlib", p)
    if h.ef_search < k:
        raise param_error("ef", f">= k ({k}); hnswlib silently uses max(ef, k)", h.ef_search,
                          where="hnswlib export")
    doc = {"space": metric, "dim": dim, "M": h.M, "ef_construction": h.ef_construction,
           "ef": h.ef_search}
    return validate_params(HnswlibConfig, doc, where="hnswlib export").model_dump()


def from_hnswlib(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:

    c = validate_params(HnswlibConfig, cfg, where=where, prefix="config.")
    metric_is(c.space, metric, "space", {m: m for m in ("l2", "ip", "cosine")}, where)
    dim_is(c.dim, dim, "dim", where)
    ef_at_least_k(c.ef, k, "ef", where)
    return Rebuilt("hnswlib", {"M": c.M, "ef_construction": c.ef_construction},
                   {"ef_search": c.ef})


to_native = to_hnswlib
from_native = from_hnswlib
