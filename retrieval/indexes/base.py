"""The one plugin point: the VectorIndex protocol and what crosses it.

A backend is a class with the class attributes below, registered by name with
:func:`retrieval.indexes.registry.register`. Build params and search params are separate models:
changing a search param never rebuilds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from retrieval.data import Metric
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter
from retrieval.indexes.portable import Portable
from retrieval.params import Params


@dataclass(frozen=True, eq=False)
class SearchResult:
    """ids: int64 (nq, k), -1 for "no result"; distances: float32 (nq, k), ascending (lower is
    closer; see :mod:`retrieval.data` for each metric's convention), +inf where id is -1."""

    ids: np.ndarray
    distances: np.ndarray


@dataclass(frozen=True)
class BuildInfo:
    """What a build reports. ``build_s`` in seconds; ``memory_bytes`` measured by the backend
    (serialized index size or server-reported), None when it cannot be measured."""

    n: int
    build_s: float
    memory_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class VectorIndex(Protocol):
    """Four methods every backend implements."""

    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> BuildInfo: ...

    def set_search_params(self, **params: Any) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> SearchResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class MaintainInfo:
    """What one ``maintain()`` did: ``action`` names the engine's own operation ("vacuum",
    "compact", "optimize", "rebuild", or "none" when the engine has nothing to do), ``seconds``
    its wall time (perf_counter), ``extra`` engine facts (rows reclaimed, segments, ...)."""

    action: str
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class SupportsWrites(Protocol):
    """Inserts and deletes on a built index (a runbook's write steps).

    Ids are the caller's int64 (>= 0, never row numbers): ``insert(vectors, ids)`` adds float32
    (m, dim) rows under ids that are not live (DataError otherwise); ``delete(ids)`` removes live
    ids (DataError naming an id that is not live); a deleted id is never returned by ``search``
    again and may be inserted again later. ``maintain()`` runs the engine's clean-up (VACUUM,
    compaction, optimizer) and times it; ``live_count()`` is the number of live vectors.
    ``cannot_write()`` is None when this index (with its build params) takes writes, else the
    reason in a few words (faiss-ivf with refine cannot delete). Call ``build`` first (an empty
    start: ``build`` on zero rows where the backend allows it, else on the first insert batch).
    """

    def insert(self, vectors: np.ndarray, ids: np.ndarray) -> None: ...

    def delete(self, ids: np.ndarray) -> None: ...

    def maintain(self) -> MaintainInfo: ...

    def live_count(self) -> int: ...

    def cannot_write(self) -> str | None: ...


@runtime_checkable
class SupportsNativeSegments(Protocol):
    """An engine that stores one index as N segments of its own (pgvector: hash partitions of
    the id, each with its own index; LanceDB: fragments), searched and merged by the engine.

    ``set_segments(n)`` before ``build`` (1: the engine's usual layout); ``segment_count()``
    after it: the count the engine itself reports; ``merge_segments()``: the engine's
    force-merge / optimize, timed (``extra["segments_after"]``: the count after it);
    ``segments_note``: what the engine's segments are, in a few words."""

    segments_note: str

    def set_segments(self, n: int) -> None: ...

    def segment_count(self) -> int | None: ...

    def merge_segments(self) -> MaintainInfo: ...


@runtime_checkable
class SupportsDeadFraction(Protocol):
    """An index that knows how much of what it holds is deleted but not yet reclaimed
    (hnswlib's marked-deleted nodes, PostgreSQL's dead tuples): a fraction in [0, 1], or None
    when the engine cannot say right now."""

    def dead_fraction(self) -> float | None: ...


@runtime_checkable
class SupportsDistanceCount(Protocol):
    """An index whose library counts the distance computations of its searches (Faiss HNSW:
    ``faiss.cvar.hnsw_stats.ndis``). ``count_distances(queries, k)`` searches ``queries`` as one
    batch with the search params already set and returns the distance computations made (a
    count summed over the queries; untimed). hnswlib has no such counter."""

    def count_distances(self, queries: np.ndarray, k: int) -> int: ...


@runtime_checkable
class SupportsReserve(Protocol):
    """An index that can make room ahead of inserts: after ``reserve(n)`` inserts up to ``n``
    vectors held in all never reallocate the library's storage (hnswlib's ``resize_index`` is
    not safe while other threads search: searching while writing reserves first)."""

    def reserve(self, n: int) -> None: ...


@runtime_checkable
class SupportsMemoryReport(Protocol):
    def memory_bytes(self) -> int: ...


@dataclass(frozen=True)
class MemoryClaim:
    """What a build's encoding claims to hold, from its parameters alone (never measured):
    ``bytes_per_vector`` (codes + the per-vector structure the backend knows of: graph links,
    stored ids, a refine copy), ``encoding`` in the engine's own words (``SQ8``, ``halfvec``,
    ``scalar int8``), ``refine_store``: where the full-precision copy used for rescoring lives
    (``ram`` | ``disk``), None when there is none. The memory doctor
    (:mod:`retrieval.memory`) compares it with the measured bytes."""

    bytes_per_vector: float
    encoding: str
    refine_store: str | None = None


@runtime_checkable
class SupportsMemoryClaim(Protocol):
    """A backend that states what its encoding should hold (see :class:`MemoryClaim`)."""

    def memory_claim(self) -> MemoryClaim: ...


@runtime_checkable
class SupportsMemoryFacts(Protocol):
    """A server-side index that reports the engine's own memory figures:
    ``memory_facts()`` -> ``{"resident_bytes": int, "source": str (which figure of the engine),
    "disk_bytes": int | None, ...}`` (bytes)."""

    def memory_facts(self) -> dict[str, Any]: ...


@runtime_checkable
class SupportsSaveLoad(Protocol):
    def save(self, path: Path) -> None: ...

    def load(self, path: Path) -> None: ...


@runtime_checkable
class SupportsSnapshot(Protocol):
    """A built index that can be written to a folder and read back in its library's own format
    (hnswlib ``save_index``, Faiss ``write_index``; never pickle), so that the build cache
    (:mod:`retrieval.indexes.buildcache`) loads it instead of building it again.

    ``save_snapshot(folder)`` writes the built index's files into the empty folder ``folder``
    and returns their names; ``load_snapshot(folder, n)`` makes this (freshly constructed,
    unbuilt) index the saved one, checking that it holds ``n`` vectors of this index's
    dimension (DataError otherwise). ``snapshot_format`` names the format (recorded in the
    cache entry). A backend without such a format (Milvus Lite) does not implement this and is
    built every time."""

    snapshot_format: ClassVar[str]

    def save_snapshot(self, folder: Path) -> list[str]: ...

    def load_snapshot(self, folder: Path, n: int) -> None: ...


@runtime_checkable
class SupportsDerivedBuild(Protocol):
    """A build DERIVED from a built index of the same backend with a larger value of one build
    param (``derived_param()``, e.g. HNSW's ``M``) and otherwise equal params, instead of built
    (``tune.build_search: derived``). ``derive_from(source, base)`` fills this (unbuilt) index
    from ``source`` (and ``base``, the vectors the source was built on, rows in the caller's
    order, for a backend that reassigns them) and returns its BuildInfo: ``build_s`` is the
    derivation's seconds, ``extra`` says ``derived_from``. The shortcut's recall error against a
    real build is measured by the caller, never assumed zero."""

    @classmethod
    def derived_param(cls) -> str: ...

    def derive_from(self, source: Any, base: Any = None) -> BuildInfo: ...


@runtime_checkable
class SupportsDominantBuild(Protocol):
    """A build param whose LARGER value is taken never to search worse at the same search
    params (``dominant_param()``, e.g. HNSW's ``ef_construction``: a wider candidate search
    per insertion, the same ``M``). With ``tune.build_search: derived`` a build whose value is
    below the largest of its group is not built (``dominated``, see
    :mod:`retrieval.tune.derived`); the answer is checked with a real build, the rule itself is
    an assumption the summary states."""

    @classmethod
    def dominant_param(cls) -> str: ...


@runtime_checkable
class SupportsBuildThreads(Protocol):
    """A backend whose build can use another thread count than its searches (hnswlib
    ``add_items(num_threads=)``, ``faiss.omp_set_num_threads`` around the build). A build with
    more than one thread is not reproducible (insertion order, hence the graph, varies)."""

    build_threads: int

    def set_build_threads(self, n: int) -> None: ...


@runtime_checkable
class SupportsSharedTraining(Protocol):
    """A backend whose trained parts can be shared between builds (Faiss IVF: one trained
    coarse quantizer for every encoding with the same ``nlist``), through a store handed over
    before ``build`` (see :class:`retrieval.indexes.buildcache.TrainedStore`)."""

    def share_training(self, store: Any) -> None: ...


class CoarsePartition(Protocol):
    """A trained coarse partition (an IVF index's quantizer): ``nlist`` lists; ``assign(x)``:
    the list of each row of ``x`` (int64, ``(n,)``); ``rank(q)``: each query's lists, nearest
    first (int64, ``(nq, nlist)``: the order an IVF search probes them). Rows and queries are
    given as the caller holds them (the backend prepares them for its metric)."""

    nlist: int
    #: rows the quantizer was trained on (after the backend's own subsampling)
    train_rows: int

    def assign(self, x: np.ndarray) -> np.ndarray: ...

    def rank(self, queries: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class SupportsCoarsePartition(Protocol):
    """An IVF backend whose recall at ``nprobe`` p is FIXED by its coarse partition when its
    lists hold exact vectors (a true neighbour is returned iff its list is among the p lists
    nearest the query): ``partition_codes()`` names the encodings where that holds;
    ``partition_gap(knob)`` is None when this build and knob are covered, else one line
    saying why not; ``coarse_partition(train)`` trains the quantizer of this (unbuilt) index
    on ``train`` exactly as its build would (the same params, seed, metric handling and
    training subsample), without filling the lists (the scale study's partition model,
    :mod:`retrieval.tune.scale_partition`)."""

    @classmethod
    def partition_codes(cls) -> tuple[str, ...]: ...

    def partition_gap(self, knob: str) -> str | None: ...

    def coarse_partition(self, train: np.ndarray) -> CoarsePartition: ...


@runtime_checkable
class SupportsHotSearch(Protocol):
    """A timed single-query path with nothing but the library call inside the timer.

    ``hot_search(k)`` validates the index state once and returns ``(call, finish)``: ``call(q)``
    runs the library on one prepared float32 (1, dim) row and returns its raw output; ``finish``
    turns that raw output into a SearchResult after the timer has stopped. The evaluation loop
    uses it so that the latency it reports is the library's, not the adapter's.
    """

    def hot_search(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], SearchResult]]: ...


@dataclass(frozen=True, eq=False)
class CountedSearch:
    """What :class:`SupportsCountedSearch` returns: the result, per query the distance
    computations the library made (int64) and the single-query latency in ms (float64)."""

    result: SearchResult
    ndis: np.ndarray
    latency_ms: np.ndarray


@runtime_checkable
class SupportsCountedSearch(Protocol):
    """A search that counts its work: ``counted_search(queries, k, search)`` runs each query
    alone (one thread, timed with :mod:`retrieval.timing`) with the search params ``search`` (a
    mapping of this backend's search fields, e.g. ``{"ef_search": 32}``; the index's own
    settings are left as they are) and counts its distance computations with the library's
    own counter (Faiss ``hnsw_stats.ndis``). Used by the adaptive per-query policies
    (:mod:`retrieval.adaptive`), whose cost unit is distance computations."""

    def counted_search(
        self, queries: np.ndarray, k: int, search: Mapping[str, Any]
    ) -> CountedSearch: ...


@runtime_checkable
class SupportsBruteForceCheck(Protocol):
    """A backend that can silently fall back to brute force (Milvus Lite) proves it did not:
    recall must move between the lowest and highest knob setting. Raises BackendError."""

    def verify_not_brute_force(self, queries: np.ndarray, k: int, exact_ids: np.ndarray) -> Any: ...


@runtime_checkable
class SupportsFilter(Protocol):
    """In-engine filtered search (the ``engine`` strategy; any index supports ``prefilter`` and
    ``postfilter``, which live outside it in :mod:`retrieval.indexes.filtered`).

    ``attach_attributes(attrs)`` is called before ``build`` when filters will be used: an engine
    that stores attributes beside the vectors (Milvus, a database) writes them at build time;
    an in-process library may ignore it. ``filtered_search(queries, k, flt)`` returns the top-k
    among the rows where ``flt.mask`` is True, rows numbered in build order (ids as
    ``search``); ``flt.where`` is the predicate for engines that take an expression, ``flt.mask``
    / ``flt.bitmap`` / ``flt.rows`` for those that take an id filter. Fewer than k ids (-1
    padded) when the engine finds fewer."""

    def attach_attributes(self, attrs: Attributes) -> None: ...

    def filtered_search(self, queries: np.ndarray, k: int, flt: RowFilter) -> SearchResult: ...


@runtime_checkable
class SupportsMemoryEstimate(Protocol):
    """A backend that can say, before building, about how many bytes of this process's memory
    an index of ``n`` vectors of ``dim`` dimensions takes with ``build`` (its validated build
    params): what a cluster task asks its scheduler for (:mod:`retrieval.tune.cluster`)."""

    @classmethod
    def expected_memory_bytes(cls, build: Any, n: int, dim: int) -> int: ...


@runtime_checkable
class SupportsAsyncSearch(Protocol):
    async def asearch(self, queries: np.ndarray, k: int) -> SearchResult: ...


@runtime_checkable
class SupportsServerAttach(Protocol):
    """An index that lives on a server (a PostgreSQL table, a Redis search index) and that
    another process can search without building it again (load clients in separate processes).

    ``server_handle()`` names the built index (picklable, no credentials: the child reads the
    server's URL from the same environment); ``attach(handle)`` makes a freshly constructed
    index with the same dim, metric and build params search that index, and its ``close`` then
    leaves the index on the server for its owner to drop."""

    def server_handle(self) -> dict[str, Any]: ...

    def attach(self, handle: Mapping[str, Any]) -> None: ...


@runtime_checkable
class SupportsPortable(Protocol):
    """A backend whose tuned params can be exported: ``portable(build, search)`` (full params,
    defaults filled in) says what they mean in library-neutral terms
    (:mod:`retrieval.indexes.portable`), or None when this build has no neutral form;
    ``export_engine`` names the export engine that runs this backend's own library (an export
    measured with another backend carries a note that it was)."""

    export_engine: ClassVar[str]

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable | None: ...


class IndexBackend:
    """Shared plumbing for backends (not required by the protocol).

    Subclasses set the class attributes and implement ``_build`` and ``_search``.
    """

    name: ClassVar[str]
    family: ClassVar[str]  # "hnsw" | "ivf" | "flat"
    BuildParams: ClassVar[type[Params]]
    SearchParams: ClassVar[type[Params]]
    #: search params along which recall is non-decreasing (the tuner's monotone knobs)
    monotone_knobs: ClassVar[tuple[str, ...]] = ()
    #: python modules that must be importable for the backend to be available
    requires: ClassVar[tuple[str, ...]] = ()
    #: (build, search) params a benchmark uses when it swaps this backend in (``rwb bench
    #: fanout --backend``): reasonable, not tuned
    bench_defaults: ClassVar[tuple[dict[str, Any], dict[str, Any]]] = ({}, {})
    #: why this backend takes no inserts / deletes (the refusal of a runbook's write step, see
    #: :func:`retrieval.indexes.writes.require_writes`); only read when it does not implement
    #: :class:`SupportsWrites`
    writes_refusal: ClassVar[str] = "it implements no inserts or deletes (SupportsWrites)"

    def __init__(
        self,
        dim: int,
        metric: Metric,
        build: Params | None = None,
        *,
        seed: int = 0,
        threads: int = 1,
        workdir: Path | None = None,
    ) -> None:
        self.dim = dim
        self.metric: Metric = metric
        self.build_params = build if build is not None else self.BuildParams()
        self.search_params = self.SearchParams()
        self.seed = seed
        self.threads = threads
        self.workdir = workdir
        self._closed = False

    # --- hooks -------------------------------------------------------------------------------
    @classmethod
    def library_version(cls) -> str:
        """Version string of the underlying library ("" if unknown)."""
        return ""

    @classmethod
    def monotone_knobs_for(cls, build: Params | None) -> tuple[str, ...]:
        """Monotone knobs of one build (a backend whose knobs depend on the build, such as
        Milvus's ef for HNSW vs nprobe for IVF, overrides this)."""
        return cls.monotone_knobs

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        """Cross-field checks (e.g. nprobe <= nlist, ef_search >= k); raise ConfigError."""

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        """Search params giving the highest recall this build allows (conformance, tuner)."""
        return {}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """Allowed integer range (inclusive) of a monotone knob for this build and k."""
        raise NotImplementedError(knob)

    # --- protocol ------------------------------------------------------------------------------
    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> BuildInfo:
        """Build the index over ``vectors`` (float32 (n, dim)); ``ids`` int64 or row numbers."""
        raise NotImplementedError

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k for each query row with the current search params."""
        raise NotImplementedError

    def set_search_params(self, **params: Any) -> None:
        from retrieval.params import validate_params

        merged = {**self.search_params.model_dump(), **params}
        self.search_params = validate_params(
            self.SearchParams, merged, where=f"backend '{self.name}' search params"
        )
        self._apply_search_params()

    def _apply_search_params(self) -> None:
        """Push ``self.search_params`` into the library (called after validation)."""

    def close(self) -> None:
        self._closed = True


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask; else ``os.cpu_count()``): the default
    number of build threads."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
