"""The contract of a LIVE collection: one the user already runs and rwb only reads.

An engine folder that can attach to a user's collection registers ``attach`` on its
:class:`~retrieval.indexes.engine.EngineDescriptor`: a function taking the ``live:`` section of a
spec (a plain mapping, validated by the engine's own pydantic model with ``extra="forbid"``) and
returning a :class:`LiveCollection`. Everything here is READ-ONLY: an attached collection is never
written to (no CREATE / INSERT / DELETE / DROP / ALTER / VACUUM, no index change, no flush, no
compaction); search-time knobs are session settings (pgvector ``SET LOCAL`` inside a read-only
transaction, a per-request parameter elsewhere).

Errors, raised before any other work: :class:`~retrieval.errors.ConfigError` (exit 2) for a
missing collection, a wrong column / field, a dimension or metric mismatch;
:class:`~retrieval.errors.NotReachable` (exit 3) for an unreachable server or refused
credentials. Messages never contain a password (``retrieval.redact``).

Ids are the collection's own (int64, never row numbers); a collection whose ids are not integers
is refused in one line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from retrieval.indexes.base import SearchResult


@dataclass(frozen=True)
class LiveDescription:
    """What the engine itself says about an attached collection.

    ``metric``: rwb's metric name (``l2``, ``cosine`` or ``ip``; distances as in
    :mod:`retrieval.data`); ``index_kind``: the engine's own index type name (``hnsw``,
    ``ivfflat``, ``IVF_PQ``, ...; None when the collection has no ANN index); ``build_params``:
    the index's build parameters in the engine's own names; ``rows``: live rows (after the
    tenant ``where`` where one is given); ``segments``: segments / fragments / partitions the
    engine reports (None where it reports none); ``details``: other engine facts, JSON-safe
    (optional ``native_names``: rwb search param name -> the engine's own name, which the export
    uses for params other than the knobs); ``untested``: a line saying this attach path is not
    tested here (a Qdrant server), else None.
    """

    engine: str
    name: str
    dim: int
    metric: str
    index_kind: str | None
    build_params: Mapping[str, Any]
    rows: int
    segments: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    untested: str | None = None


@dataclass(frozen=True)
class LiveKnob:
    """One search-time knob of a live collection: ``name`` as rwb's search params spell it,
    ``native`` the engine's own name (``hnsw.ef_search``), ``low``..``high`` its integer range
    (recall grows with it), ``default`` the value the collection uses when nobody sets it."""

    name: str
    native: str
    low: int
    high: int
    default: int | None = None


@runtime_checkable
class LiveCollection(Protocol):
    """A read-only handle on a user's collection.

    ``search`` runs the engine's ANN path with the current search params (set by
    ``set_search_params``: unknown keys raise ConfigError) and returns the collection's own ids
    (int64, -1 padded) and distances in rwb's convention (lower is closer). ``knobs`` lists the
    search-time knobs an in-place sweep may set. ``close`` releases connections only.
    """

    def describe(self) -> LiveDescription: ...

    def knobs(self) -> tuple[LiveKnob, ...]: ...

    def set_search_params(self, **params: Any) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> SearchResult: ...

    def close(self) -> None: ...


@runtime_checkable
class SupportsExactSearch(Protocol):
    """The engine's own exact path (pgvector with index scans off inside the read-only
    transaction, LanceDB ``bypass_vector_index``, Qdrant ``exact``, Milvus / Redis brute force
    where they offer one): the true top-k, same ids and distance convention as ``search``."""

    def search_exact(self, queries: np.ndarray, k: int) -> SearchResult: ...


@runtime_checkable
class SupportsSnapshot(Protocol):
    """The vectors and ids streamed out in batches (COPY, query iterators, SCAN), in a stable
    order: each item is ``(ids int64 (m,), vectors float32 (m, dim))``. ``start`` skips the first
    ``start`` rows of that order (a resumed snapshot)."""

    def iter_vectors(self, batch: int = 10_000, start: int = 0
                     ) -> Iterator[tuple[np.ndarray, np.ndarray]]: ...


#: an engine's attach hook: the spec's ``live:`` section (``engine`` key included) and the
#: spec's file (for messages) -> a read-only handle
Attach = Any  # Callable[[Mapping[str, Any], str | None], LiveCollection]

__all__ = ["Attach", "LiveCollection", "LiveDescription", "LiveKnob", "SupportsExactSearch",
           "SupportsSnapshot"]
