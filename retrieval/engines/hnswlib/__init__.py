"""hnswlib (in process): the HNSW backend and its export."""

from collections.abc import Mapping
from typing import Any

from retrieval.engines.hnswlib import export, index  # noqa: F401  (registers the backend)
from retrieval.indexes.engine import EngineDescriptor, register_engine

#: the conformance suite's cases (tests/engines/test_conformance.py)
CONFORMANCE: tuple[dict[str, Any], ...] = tuple(
    {"backend": "hnswlib", "metric": m, "build": {"M": 16, "ef_construction": 64}}
    for m in ("l2", "ip", "cosine"))


def _threads(spec_threads: int | None) -> dict[str, Any]:
    """hnswlib's ``num_threads`` (the spec's ``threads``) once hnswlib is in use."""
    import sys

    if spec_threads is None or "hnswlib" not in sys.modules:
        return {}
    return {"hnswlib_num_threads": int(spec_threads)}


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
    thread_settings=_threads,
    conformance=CONFORMANCE,
))
