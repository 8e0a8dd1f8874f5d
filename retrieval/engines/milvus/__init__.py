"""Milvus (Lite embedded, or any server by URI): the backend, its parameter models and checks,
filter expressions, export and inverse, and the local Milvus Lite server."""

from collections.abc import Mapping
from typing import Any

from retrieval.engines.milvus import export, hybrid, index, live  # noqa: F401  (registers the backend)
from retrieval.engines.milvus.server import SERVICE, milvus_lite_server
from retrieval.engines.milvus.sparse import MilvusSparse
from retrieval.indexes.engine import EngineDescriptor, register_engine


def _filter_call(backend: str, search: Mapping[str, Any], k: int) -> str:
    return (f"client.search(limit={k}, search_params={{'params': {dict(search)}}}, "
            f"filter='<expression>')")


ENGINE = register_engine(EngineDescriptor(
    name="milvus",
    backends=("milvus",),
    extra="milvus",
    libraries=("pymilvus", "milvus-lite"),
    knobs=("ef", "nprobe"),
    ef_knob="ef",
    to_native=export.to_native,
    from_native=export.from_native,
    filter_form="search(..., filter='<boolean expression on scalar fields>')",
    server="retrieval.engines.milvus.server",
    local_server=milvus_lite_server,
    service=SERVICE,
    takes_auto=True,
    hybrid=hybrid.HYBRID,
    sparse=MilvusSparse,
    attach=live.attach,
    summary="Milvus Lite embedded, or a Milvus server by URI",
    filter_call=_filter_call,
))
