"""Qdrant's engine in process (qdrant-edge-py): the backend with scalar / binary / product
quantization, payload filters, and the collection-config export with its inverse."""

from retrieval.engines.qdrant import (  # noqa: F401  (registers the backend)
    export,
    hybrid,
    index,
    live,
)
from retrieval.indexes.engine import EngineDescriptor, register_engine

ENGINE = register_engine(EngineDescriptor(
    name="qdrant",
    backends=("qdrant",),
    extra="qdrant",
    libraries=("qdrant-edge-py",),
    knobs=("hnsw_ef", "oversampling"),
    ef_knob="hnsw_ef",
    to_native=export.to_native,
    from_native=export.from_native,
    filter_knobs=export.filter_knobs,
    filter_form="QueryRequest(filter=Filter(must=[FieldCondition(...)]))",
    attach=live.attach,
    summary="Qdrant's engine in process (qdrant-edge-py)",
    hybrid=hybrid.HYBRID,
    sparse=hybrid.QdrantSparse,
))
