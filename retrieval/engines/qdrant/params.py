"""Parameters of the ``qdrant`` backend and their checks (not a backend: no ``register`` here).

Names are Qdrant's own (``m``, ``ef_construct``, ``full_scan_threshold``, ``hnsw_ef``,
``rescore``, ``oversampling``), so an export and a sweep spec read the same. Limits are checked
here, before anything reaches the engine (qdrant-edge accepts ``m=1`` or ``ef_construct=0``
without a word, and vector sizes the Qdrant server refuses).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from retrieval.errors import param_error
from retrieval.indexes.portable import Hnsw
from retrieval.params import Params

WHERE = "backend 'qdrant'"
#: largest vector size the Qdrant server accepts (its API validates size in [1, 65536])
DIM_MAX = 65536
#: largest hnsw_ef accepted (the tuner's upper bound)
HNSW_EF_MAX = 4096
QUANTIZATIONS = ("none", "scalar", "binary", "product")
PQ_COMPRESSIONS = ("x4", "x8", "x16", "x32", "x64")
#: largest ``oversampling`` accepted (the top of its range as a tuning knob)
OVERSAMPLING_MAX = 64


class QdrantBuild(Params):
    """A Qdrant collection (one shard of the embedded engine) with an HNSW index.

    ``m``: links per node (layer 0 has 2*m); ``ef_construct``: candidate list while building;
    ``full_scan_threshold`` (KB of vectors per segment): below it Qdrant answers by full scan, so
    rwb's default (1) keeps the HNSW graph in use; ``indexing_threshold`` (KB): segments larger
    than this get an HNSW index (Qdrant's default, 10000 KB = ~26k x 96-d vectors, leaves a small
    collection unindexed: a silent brute force); ``on_disk``: vectors and graph memory-mapped
    from disk instead of held in RAM; ``quantization``: none | scalar (int8) | binary | product
    (``pq_compression`` x4..x64), kept in RAM (``always_ram``); ``quantile`` for scalar.
    """

    m: int = Field(16, ge=2, le=256)
    ef_construct: int = Field(100, ge=4, le=16384)
    full_scan_threshold: int = Field(1, ge=1, le=2**31 - 1)
    indexing_threshold: int = Field(1, ge=1, le=2**31 - 1)
    on_disk: bool = False
    quantization: Literal["none", "scalar", "binary", "product"] = "none"
    quantile: float | None = Field(None, gt=0.5, le=1.0)
    pq_compression: Literal["x4", "x8", "x16", "x32", "x64"] = "x8"
    always_ram: bool = True


class QdrantSearch(Params):
    """``hnsw_ef``: candidate list per query (>= k, checked at search); with quantization,
    ``rescore`` re-ranks the candidates by the original vectors and ``oversampling`` (>= 1)
    fetches ``oversampling * k`` candidates from the quantized index first.

    Filtered searches only (unfiltered ones ignore them): ``acorn`` turns on Qdrant's ACORN
    filtered graph walk (``SearchParams(acorn=AcornSearchParams(enable=True))``: neighbours of
    filtered-out neighbours are explored too); ``acorn_max_selectivity`` (0..1, Qdrant's
    default 0.4 when unset): ACORN is used only for filters whose estimated selectivity is
    below it."""

    hnsw_ef: int = Field(64, ge=1, le=HNSW_EF_MAX)
    rescore: bool = True
    oversampling: float = Field(1.0, ge=1.0, le=OVERSAMPLING_MAX)
    acorn: bool = False
    acorn_max_selectivity: float | None = Field(None, gt=0.0, le=1.0)


def check_dim(dim: int) -> None:
    if dim > DIM_MAX:
        raise param_error("dim", f"in [1, {DIM_MAX}] (Qdrant's vector size limit)", dim,
                          where=WHERE)


def check_build(build: Params) -> None:
    """Cross-field build checks: quantile only for scalar, pq_compression only for product."""
    assert isinstance(build, QdrantBuild)
    if build.quantile is not None and build.quantization != "scalar":
        raise param_error("quantile", "unset unless quantization is 'scalar'", build.quantile,
                          where=f"{WHERE} build params")
    if "pq_compression" in build.model_fields_set and build.quantization != "product":
        raise param_error("pq_compression", "unset unless quantization is 'product'",
                          build.pq_compression, where=f"{WHERE} build params")


def check_search(build: Params, search: Params, k: int) -> None:
    """``hnsw_ef >= k`` (Qdrant searches with max(hnsw_ef, k) silently); ``rescore`` and
    ``oversampling`` only mean something on a quantized collection."""
    assert isinstance(build, QdrantBuild) and isinstance(search, QdrantSearch)
    where = f"{WHERE} search params"
    if search.hnsw_ef < k:
        raise param_error("hnsw_ef", f">= k ({k}) and <= {HNSW_EF_MAX}", search.hnsw_ef,
                          where=where)
    if build.quantization == "none" and search.oversampling != 1.0:
        raise param_error("oversampling", "1.0 when quantization is 'none'", search.oversampling,
                          where=where)
    if search.oversampling != 1.0 and not search.rescore:
        raise param_error("oversampling", "1.0 when rescore is false (without rescoring by the "
                          "stored originals the extra candidates are only cut off again)",
                          search.oversampling, where=where)
    if search.acorn_max_selectivity is not None and not search.acorn:
        raise param_error("acorn_max_selectivity", "unset unless acorn is true",
                          search.acorn_max_selectivity, where=where)
    if search.acorn:
        check_acorn()


def check_acorn(module: Any = None) -> None:
    """``acorn: true`` needs a qdrant-edge-py whose ``SearchParams`` takes ``acorn`` (Qdrant's
    ACORN came with Qdrant 1.16); ``module`` defaults to the installed ``qdrant_edge``."""
    if module is None:
        import qdrant_edge as module
    if getattr(module, "AcornSearchParams", None) is None:
        from retrieval.indexes.registry import package_version

        raise param_error("acorn", f"false: the installed qdrant-edge-py "
                          f"{package_version('qdrant-edge-py')} has no ACORN "
                          f"(AcornSearchParams); it needs Qdrant >= 1.16's engine", True,
                          where=f"{WHERE} search params")


#: build params the neutral HNSW form carries as Qdrant's own (Hnsw.native)
NATIVE_BUILD = ("full_scan_threshold", "indexing_threshold", "on_disk", "quantile",
                "pq_compression", "always_ram")
NATIVE_SEARCH = ("rescore", "oversampling")


def portable_of(build: Mapping[str, Any], search: Mapping[str, Any]) -> Hnsw:
    quant = {"none": None, "scalar": "SQ8", "binary": "BQ", "product": "PQ"}[
        str(build.get("quantization", "none"))]
    native = tuple((k, build[k]) for k in NATIVE_BUILD if k in build) + tuple(
        (k, search[k]) for k in NATIVE_SEARCH if k in search)
    return Hnsw(int(build["m"]), int(build["ef_construct"]), int(search["hnsw_ef"]), quant,
                native_engine="qdrant", native=native)


__all__ = ["DIM_MAX", "HNSW_EF_MAX", "OVERSAMPLING_MAX", "QdrantBuild", "QdrantSearch",
           "check_acorn", "check_build", "check_dim", "check_search", "portable_of"]
