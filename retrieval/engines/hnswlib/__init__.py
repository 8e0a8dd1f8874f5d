"""hnswlib (in process): the HNSW backend and its export."""

from retrieval.engines.hnswlib import export, index  # noqa: F401  (registers the backend)
from retrieval.indexes.engine import EngineDescriptor, register_engine

ENGINE = register_engine(EngineDescriptor(
    name="hnswlib",
    backends=("hnswlib",),
    extra="hnswlib",
    libraries=("hnswlib",),
    knobs=("ef_search",),
    ef_knob="ef_search",
    to_native=export.to_native,
    from_native=export.from_native,
    filter_form="knn_query(q, k, filter=lambda label: matches(label))",
    roles=(("hnsw", "hnswlib"),),
    summary="hnswlib in process",
))
