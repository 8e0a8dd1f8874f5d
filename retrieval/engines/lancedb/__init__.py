"""LanceDB, embedded (``lancedb``): the IVF_PQ and IVF_HNSW_SQ backends and the export in
LanceDB's own names (``create_index`` arguments + the query's knobs) with its inverse."""

from retrieval.engines.lancedb import export, index, live  # noqa: F401  (registers the backends)
from retrieval.indexes.engine import EngineDescriptor, register_engine

ENGINE = register_engine(EngineDescriptor(
    name="lancedb",
    backends=("lancedb-ivfpq", "lancedb-hnsw"),
    extra="lancedb",
    libraries=("lancedb",),
    knobs=("ef", "nprobes", "refine_factor"),
    ef_knob="ef",
    to_native=export.to_native,
    from_native=export.from_native,
    attach=live.attach,
    summary="LanceDB embedded: IVF_PQ and IVF_HNSW_SQ (nprobes / refine_factor / ef)",
))
