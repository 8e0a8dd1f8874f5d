"""Faiss (in process): flat, HNSW and IVF (Flat / SQ8 / PQ, optional refine) backends and the
``index_factory`` / ``ParameterSpace`` export."""

from collections.abc import Mapping
from typing import Any

from retrieval.engines.faiss import export, flat, hnsw, ivf  # noqa: F401  (registers backends)
from retrieval.indexes.engine import EngineDescriptor, register_engine


def _filter_call(backend: str, search: Mapping[str, Any], k: int) -> str:
    sel = "sel=faiss.IDSelectorBitmap(n, bitmap)"
    if backend == "faiss-hnsw":
        return f"faiss.SearchParametersHNSW(efSearch={search.get('ef_search')}, {sel})"
    if backend == "faiss-ivf":
        return f"faiss.SearchParametersIVF(nprobe={search.get('nprobe')}, {sel})"
    if backend == "faiss-flat":
        return f"faiss.SearchParameters({sel})"
    return f"{backend} filtered search {dict(search)}"


ENGINE = register_engine(EngineDescriptor(
    name="faiss",
    backends=("faiss-hnsw", "faiss-ivf", "faiss-flat"),
    extra=None,  # a core dependency
    libraries=("faiss-cpu",),
    knobs=("ef_search", "nprobe", "k_factor"),
    ef_knob="ef_search",
    to_native=export.to_native,
    from_native=export.from_native,
    filter_form="SearchParameters*(sel=faiss.IDSelectorBitmap(n, bitmap)) (or IDSelectorBatch)",
    roles=(("exact", "faiss-flat"), ("ivf", "faiss-ivf"), ("quantizer", "faiss-ivf")),
    summary="Faiss in process: HNSW, IVF (Flat / SQ8 / PQ + refine), exact flat",
    filter_call=_filter_call,
))
