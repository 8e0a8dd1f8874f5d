"""hnswlib (in process): the HNSW backend and its export."""

from collections.abc import Mapping
from typing import Any

from retrieval.engines.hnswlib import export, index  # noqa: F401  (registers the backend)
from retrieval.indexes.engine import EngineDescriptor, register_engine


def _filter_call(backend: str, search: Mapping[str, Any], k: int) -> str:
    return (f"index.set_ef({search.get('ef_search')}); index.knn_query(q, k={k}, "
            f"filter=lambda label: matches[label])")


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
    filter_call=_filter_call,
))
