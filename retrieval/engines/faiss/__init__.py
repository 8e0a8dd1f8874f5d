"""Faiss (in process): flat, HNSW and IVF (Flat / SQ8 / PQ, optional refine) backends and the
``index_factory`` / ``ParameterSpace`` export."""

from retrieval.engines.faiss import export, flat, hnsw, ivf  # noqa: F401  (registers backends)
from retrieval.indexes.engine import EngineDescriptor, register_engine

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
))
