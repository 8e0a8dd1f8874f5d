"""Weaviate, export only: rwb cannot run it (no in-process engine or server here), so its files
are "not measurable here" unless ``rwb verify --engine NAME`` measures them elsewhere."""

from retrieval.engines.weaviate import export
from retrieval.indexes.engine import EngineDescriptor, register_engine

ENGINE = register_engine(EngineDescriptor(
    name="weaviate",
    to_native=export.to_native,
    portable_reader=export.portable_reader,
    filter_form="where filter (pre-filtered allow-list)",
    summary="Weaviate (export only)",
))
