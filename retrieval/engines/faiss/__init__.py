"""Faiss (in process): flat, HNSW and IVF (Flat / SQ8 / PQ, optional refine) backends and the
``index_factory`` / ``ParameterSpace`` export."""

from collections.abc import Mapping
from typing import Any

from retrieval.engines.faiss import export, flat, hnsw, ivf  # noqa: F401  (registers backends)
from retrieval.engines.faiss.common import thread_settings
from retrieval.indexes.engine import EngineDescriptor, register_engine

HNSW = {"M": 16, "ef_construction": 64}
#: the conformance suite's cases (tests/engines/test_conformance.py)
CONFORMANCE: tuple[dict[str, Any], ...] = (
    *({"backend": "faiss-hnsw", "metric": m, "build": HNSW} for m in ("l2", "ip", "cosine")),
    {"backend": "faiss-ivf", "metric": "l2", "build": {"nlist": 32}, "label": "faiss-ivf-flat-l2"},
    {"backend": "faiss-ivf", "metric": "l2", "build": {"nlist": 32, "encoding": "sq8"},
     "min_recall": 0.97, "exact_distances": False, "label": "faiss-ivf-sq8-l2"},
    {"backend": "faiss-ivf", "metric": "ip",
     "build": {"nlist": 32, "encoding": "sq8", "refine": True},
     "label": "faiss-ivf-sq8-refine-ip"},
    {"backend": "faiss-ivf", "metric": "cosine",
     "build": {"nlist": 32, "encoding": "pq", "pq_m": 8, "pq_nbits": 4, "refine": True},
     "knobs_with_effect": ("nprobe", "k_factor"), "label": "faiss-ivf-pq-refine-cosine"},
    {"backend": "faiss-flat", "metric": "l2"},
)


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
    thread_settings=thread_settings,
    conformance=CONFORMANCE,
))
