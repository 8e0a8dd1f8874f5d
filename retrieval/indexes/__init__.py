"""Index backends: one module per backend, registered by name (see registry.py)."""

from retrieval.indexes.base import (
    BuildInfo,
    IndexBackend,
    SearchResult,
    SupportsAsyncSearch,
    SupportsBuildThreads,
    SupportsMemoryReport,
    SupportsSaveLoad,
    SupportsSnapshot,
    VectorIndex,
)
from retrieval.indexes.registry import (
    all_backends,
    backend_status,
    create_index,
    get_backend,
    register,
)

__all__ = [
    "BuildInfo",
    "IndexBackend",
    "SearchResult",
    "SupportsAsyncSearch",
    "SupportsBuildThreads",
    "SupportsMemoryReport",
    "SupportsSaveLoad",
    "SupportsSnapshot",
    "VectorIndex",
    "all_backends",
    "backend_status",
    "create_index",
    "get_backend",
    "register",
]
