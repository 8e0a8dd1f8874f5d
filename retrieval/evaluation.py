"""THE evaluation loop: one code path for every backend, used by `rwb eval` and by the tuner.

:class:`Evaluator` holds a dataset with its exact ground truth, builds each index once per build
config (cached by build params), and measures search configs on it:

- **single** mode: each query is timed alone (latency percentiles, ms), through the backend's
  hot path where it has one (only the library call between the clock reads);
- **batch** mode: all queries in one call, best of ``batch_repeats`` runs (throughput, QPS).

Both modes start after a warm-up and time with :mod:`retrieval.timing` (gc paused,
``perf_counter_ns``). Recall is computed after timing, outside the timed region. Search configs
checked once upstream (:class:`retrieval.indexes.entry.SearchConfig`) are trusted here and by
the backend; a plain mapping is validated.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.groundtruth.exact import GroundTruth, exact_distances, ground_truth
from retrieval.indexes import BuildInfo, IndexBackend, SearchResult, get_backend
from retrieval.indexes.base import (
    SupportsBruteForceCheck,
    SupportsBuildThreads,
    SupportsDerivedBuild,
    SupportsFilter,
    SupportsHotSearch,
    SupportsSharedTraining,
    available_cpus,
)
from retrieval.indexes.buildcache import (
    CacheSettings,
    IndexCache,
    Outcome,
    TrainedStore,
    build_or_load,
)
from retrieval.indexes.entry import SearchConfig, apply_search, check_search
from retrieval.params import Params, validate_params
from retrieval.phases import phase
from retrieval.stats.metrics import (
    latency_summary,
    recall_by_id,
    recall_fewer_than_k,
    recall_summary,
    recall_tie_aware,
)
from retrieval.timing import time_each, time_repeat, warm_up

if TYPE_CHECKING:
    from retrieval.workload import Bucket

log = logging.getLogger(__name__)

Mode = Literal["single", "batch"]
MODES: tuple[Mode, ...] = ("single", "batch")


def _rss_bytes() -> int:
    import psutil

    return int(psutil.Process(os.getpid()).memory_info().rss)


@dataclass(frozen=True, eq=False)
class FilterCell:
    """What a filtered measurement searched: each query with its own filter of selectivity
    ``bucket``, through ``strategy`` (``engine`` / ``prefilter`` / ``postfilter``, the latter
    fetching ``overfetch`` x k), for the index entry ``label``."""

    label: str
    strategy: str
    bucket: Bucket
    overfetch: int | None = None


def per_query_recall(found: np.ndarray, exact: np.ndarray, k: int, *,
                     live: bool = False) -> np.ndarray:
    """THE per-query recall@k by id of the evaluation loop (every measurement, and each answer
    of a load point): against a fixed base's exact top-k, hits / k; against a live set's
    (``live``: -1 past the live count), the fewer-than-k rule. float64 (nq,)."""
    return recall_fewer_than_k(found, exact, k) if live else recall_by_id(found, exact, k)


@dataclass(frozen=True, eq=False)
class StepTruth:
    """The exact answers at one step of a live workload (a runbook's search step): ``gt``, the
    exact top-k of the queries over the live set then, by the caller's (engine) ids, -1 past
    the live count; ``rows``, those ids -> base rows (-1 for an id not live: the exact
    distances of what was retrieved). Recall against it follows the fewer-than-k rule."""

    gt: GroundTruth
    rows: Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, eq=False)
class Measurement:
    """One search config measured in one mode on one built index.

    ``latency_ms``: per-query latencies in ms (single mode) or the one timed batch call in ms
    (batch mode). ``qps``: queries per second (batch: best run; single: 1000 / mean latency).
    Recall is by id (``per_query_recall``) and tie-aware (``per_query_recall_tie``).
    """

    backend: str
    build: dict[str, Any]
    search: dict[str, Any]
    mode: Mode
    k: int
    per_query_recall: np.ndarray
    per_query_recall_tie: np.ndarray
    latency_ms: np.ndarray
    qps: float
    build_s: float
    memory_bytes: int | None
    threads: int
    query_set: str = "all"
    extra: dict[str, Any] = field(default_factory=dict)
    #: the retrieved row positions (n_queries, k), -1 = no result (not in the summary: saved
    #: as the caller's ids, see :mod:`retrieval.tune.retrieved`)
    ids: np.ndarray | None = None
    #: the positions of the measured queries in the dataset's query order
    query_idx: np.ndarray | None = None
    #: a filtered search's cell (strategy, selectivity bucket); None: unfiltered
    filtered: FilterCell | None = None

    @property
    def n_queries(self) -> int:
        return int(self.per_query_recall.shape[0])

    @property
    def recall(self) -> float:
        return float(self.per_query_recall.mean())

    def summary(self, target: float | None = None) -> dict[str, Any]:
        """Flat dict of the scalar results (no arrays)."""
        out: dict[str, Any] = {
            "backend": self.backend,
            "build": dict(self.build),
            "search": dict(self.search),
            "mode": self.mode,
            "query_set": self.query_set,
            "k": self.k,
            "n_queries": self.n_queries,
            **recall_summary(self.per_query_recall, target),
            "recall_tie": float(self.per_query_recall_tie.mean()),
            "qps": self.qps,
            "build_s": self.build_s,
            "memory_bytes": self.memory_bytes,
            "threads": self.threads,
            **self.extra,
        }
        if self.mode == "single":
            out.update(latency_summary(self.latency_ms))
        else:
            out["batch_ms"] = float(self.latency_ms.min())
        return out


@dataclass
class BuiltIndex:
    """An index built once for one build config; search params change, the build does not."""

    backend: str
    build: Params
    index: IndexBackend
    info: BuildInfo
    rss_delta_bytes: int
    #: how the index came to be (cache hit: loaded in ``load_s`` s; ``info.build_s`` is the
    #: original build time either way)
    outcome: Outcome = field(default_factory=lambda: Outcome("off", 0.0))
    build_threads: int = 1
    #: :meth:`retrieval.memory.MemoryReport.to_dict` of this build, when measured
    memory_report: dict[str, Any] | None = None

    @property
    def build_dict(self) -> dict[str, Any]:
        return self.build.model_dump(mode="json", exclude_none=True)

    @property
    def memory_bytes(self) -> int | None:
        """Index size in bytes as measured by the backend, else the RSS growth during build."""
        return (
            self.info.memory_bytes if self.info.memory_bytes is not None else self.rss_delta_bytes
        )


class Evaluator:
    """Dataset + exact ground truth + a cache of built indexes; measures search configs.

    ``threads``: search threads; ``build_threads``: build threads (None: ``threads``, as
    before there was a separate count; sweep and eval specs default to every CPU).
    ``index_cache``: the on-disk build cache (True: the default one, see
    :mod:`retrieval.indexes.buildcache`; False: none), used for every backend that has a
    snapshot format; a loaded index reports its original build time.
    ``eager_truth``: compute the dataset's exact top-k now (False: at its first use; a live
    workload scores each step against that step's own truth, :class:`StepTruth`).
    """

    def __init__(self, ds: VectorDataset, k: int = 10, *, threads: int = 1, seed: int = 0,
                 warmup: int = 32, batch_repeats: int = 3, workdir: Path | None = None,
                 gt: GroundTruth | None = None, build_threads: int | None = None,
                 index_cache: IndexCache | CacheSettings | bool = True, source: str = "",
                 eager_truth: bool = True) -> None:
        #: the spec file the settings came from (prefixes errors about them), or ""
        self.source = source
        pre = f"{source}: " if source else ""
        if k < 1:
            raise ConfigError(f"{pre}field 'k' must be an integer >= 1; received {k}")
        if k > ds.n_base:
            raise ConfigError(
                f"{pre}field 'k' must be <= the number of base vectors ({ds.n_base}); "
                f"received {k}"
            )
        self.ds = ds
        self.k = k
        self.threads = threads
        self.seed = seed
        self.warmup = warmup
        self.batch_repeats = max(1, batch_repeats)
        self.workdir = workdir
        self._gt = None if gt is None else gt.top(max(k, 1))
        if eager_truth:
            self._gt = self.gt
        self._built: dict[tuple[str, str], BuiltIndex] = {}
        #: guards ``_built`` and the work-folder numbering against concurrent builds
        self._lock = threading.Lock()
        self._workdirs = 0
        #: build threads: as given, else the search threads (a sweep spec's default is every
        #: CPU, see :meth:`for_spec`); one thread asked for explicitly means reproducible
        #: builds: a cached build made with several threads is then not taken
        self.build_threads = self.threads if build_threads is None else int(build_threads)
        self.reproducible = build_threads == 1
        if isinstance(index_cache, IndexCache):
            self.cache: IndexCache | None = index_cache
        elif isinstance(index_cache, CacheSettings):
            self.cache = IndexCache(index_cache)
        else:
            self.cache = IndexCache() if index_cache else None
        self.trained = TrainedStore(self.cache, ds.fingerprint)
        #: one record per build or load: backend, build params, cache use, times (s)
        self.build_log: list[dict[str, Any]] = []
        #: set by filtered evaluation: given to SupportsFilter backends before each build
        self.attributes: Any = None

    @property
    def gt(self) -> GroundTruth:
        """The exact top-k of the dataset's queries over its base (row positions), computed at
        the first use (:func:`retrieval.groundtruth.exact.ground_truth`, cached on disk)."""
        if self._gt is None:
            self._gt = ground_truth(self.ds, self.k).top(max(self.k, 1))
        return self._gt

    @gt.setter
    def gt(self, gt: GroundTruth) -> None:
        self._gt = gt

    def cache_report(self) -> dict[str, Any]:
        """What the build cache did in this evaluator (for the run manifest)."""
        uses = [b["cache"] for b in self.build_log]
        return {
            "enabled": bool(self.cache and self.cache.enabled),
            "dir": str(self.cache.root) if self.cache else None,
            "max_bytes": self.cache.max_bytes if self.cache else None,
            "hits": uses.count("hit"), "misses": uses.count("miss"), "off": uses.count("off"),
            "shared_ivf_quantizers": self.trained.shared,
            "builds": list(self.build_log),
            "note": "build_s of a loaded index (cache: hit) is the original build time, so "
                    "results stay comparable; load_s is the time to load it. Backends without "
                    "a snapshot format (Milvus Lite) are built every time (cache: off).",
        }

    def threads_report(self) -> dict[str, Any]:
        """Build vs search threads (for the run manifest)."""
        return {
            "build_threads": self.build_threads,
            "search_threads": self.threads,
            "reproducible_builds": self.build_threads == 1,
            "cached_builds_taken": "only one-thread builds" if self.reproducible else "any",
            "note": "with more than one build thread, hnswlib add_items and faiss HNSW add "
                    "insert in a varying order, so the graph (and recall) can differ between "
                    "builds of the same seed; IVF k-means/add are not affected. Set "
                    "index_build.threads: 1 (or --build-threads 1) for reproducible builds.",
        }

    @classmethod
    def for_spec(cls, spec: Any, ds: VectorDataset, workdir: Path | None,
                 gt: GroundTruth | None = None) -> Evaluator:
        """An evaluator with a sweep spec's k, threads, seed, warm-up and batch repeats
        (``gt``: the exact ground truth of ``ds`` when the caller has it)."""
        return cls(
            ds,
            spec.k,
            gt=gt,
            threads=spec.threads,
            seed=spec.seed,
            warmup=spec.warmup,
            batch_repeats=spec.batch_repeats,
            workdir=workdir,
            build_threads=spec.index_build.threads or available_cpus(),
            index_cache=spec_cache_settings(spec),
            source="" if spec.source == "<memory>" else str(spec.source),
        )

    # --- building --------------------------------------------------------------------------
    def validate_build(self, backend: str, build: Mapping[str, Any] | Params) -> Params:
        """Build params validated (a Params instance is taken as validated already)."""
        cls = get_backend(backend)
        if isinstance(build, Params):
            return build
        return validate_params(cls.BuildParams, build, where=f"backend '{backend}' build params")

    def build(self, backend: str, build: Mapping[str, Any] | Params, *,
              build_threads: int | None = None) -> BuiltIndex:
        """Build (or reuse) the index for ``backend`` with ``build`` params. ``build_threads``:
        this build's threads (None: the evaluator's); several builds may run at once from
        threads (``tune.concurrent_builds``), each with its own thread count."""
        params = self.validate_build(backend, build)
        key = (backend, params.model_dump_json())
        with self._lock:
            if key in self._built:
                return self._built[key]
            self._workdirs += 1
            slot = self._workdirs - 1
        workdir = self.workdir / f"{backend}-{slot}" if self.workdir else None
        index, threads = self.new_index(backend, params, workdir=workdir,
                                        build_threads=build_threads)
        if isinstance(index, SupportsSharedTraining):
            index.share_training(self.trained)
        built = self._build_logged(backend, index, params, self.ds.base, None,
                                   self.ds.fingerprint, threads, self.cache)
        if isinstance(index, SupportsBruteForceCheck) and \
                get_backend(backend).monotone_knobs_for(params):
            # a silent brute-force fallback would make every knob setting look perfect
            n = min(self.ds.n_queries, 100)
            index.verify_not_brute_force(self.ds.queries[:n], self.k, self.gt.ids[:n])
        self._built[key] = built
        return built

    def new_index(self, backend: str, params: Params, *, workdir: Path | None,
                  seed: int | None = None, build_threads: int | None = None,
                  **options: Any) -> tuple[IndexBackend, int]:
        """An unbuilt index of ``backend`` with ``params`` on this dataset's dim and metric (the
        evaluator's seed unless ``seed``; ``options``: the backend's keyword arguments, e.g. a
        server's ``uri``) and its build threads; ``workdir`` is made when given."""
        if workdir:
            workdir.mkdir(parents=True, exist_ok=True)
        cls = get_backend(backend)
        index = cls(self.ds.dim, self.ds.metric, params,
                    seed=self.seed if seed is None else seed, threads=self.threads,
                    workdir=workdir, **options)
        threads = self.threads
        if isinstance(index, SupportsBuildThreads):
            threads = self.build_threads if build_threads is None else int(build_threads)
            index.set_build_threads(threads)
        if self.attributes is not None and isinstance(index, SupportsFilter):
            index.attach_attributes(self.attributes)
        return index, threads

    def build_on(self, backend: str, params: Params, vectors: np.ndarray, ids: np.ndarray, *,
                 workdir: Path | None, seed: int | None = None, cached: bool = True,
                 **options: Any) -> BuiltIndex:
        """The index of ``params`` built on ``vectors`` under the caller's ``ids`` (a live
        index: a runbook's first insert, a fresh build of a churned live set), through the
        same build path as :meth:`build` (build threads, the on-disk build cache when
        ``cached``, the build log). Not kept among the evaluator's built indexes: the caller
        closes it. ``cached=False`` for an index that will be written to (a snapshot of the
        cache must never be)."""
        index, threads = self.new_index(backend, params, workdir=workdir, seed=seed, **options)
        return self._build_logged(backend, index, params, vectors, ids, None, threads,
                                  self.cache if cached else None)

    def _build_logged(self, backend: str, index: IndexBackend, params: Params,
                      vectors: np.ndarray, ids: np.ndarray | None, fingerprint: str | None,
                      threads: int, cache: IndexCache | None) -> BuiltIndex:
        """Build (or load from ``cache``) ``index``; one record in :attr:`build_log`."""
        gc.collect()
        rss0 = _rss_bytes()
        try:
            with phase("build"):
                info, outcome = build_or_load(cache, index, vectors, ids, data=fingerprint,
                                              reproducible=self.reproducible)
        except ConfigError as exc:  # params that do not fit the data (nlist > n): the file
            if not self.source or str(exc).startswith(f"{self.source}:"):
                raise
            raise ConfigError(f"{self.source}: {exc}") from None
        rss_delta = max(0, _rss_bytes() - rss0)
        self.build_log.append({"backend": backend, "build": params.model_dump(mode="json"),
                               "build_threads": threads, **outcome.to_dict()})
        log.info("%s %s %s in %.2f s (build %.2f s)", "loaded" if outcome.cache == "hit" else
                 "built", backend, params.model_dump(), outcome.load_s or info.build_s,
                 info.build_s)
        return BuiltIndex(backend, params, index, info, rss_delta, outcome, threads)

    def derive(self, backend: str, build: Mapping[str, Any] | Params,
               source: BuiltIndex) -> BuiltIndex:
        """The index of ``build`` DERIVED from ``source`` (a built index of the same backend,
        :class:`~retrieval.indexes.base.SupportsDerivedBuild`), not built; ``info.build_s`` is
        the derivation's seconds and ``info.extra["derived_from"]`` the source's params."""
        params = self.validate_build(backend, build)
        key = (backend, params.model_dump_json())
        if key in self._built:
            return self._built[key]
        index, threads = self.new_index(backend, params, workdir=None)
        if not isinstance(index, SupportsDerivedBuild):
            raise ConfigError(f"backend '{backend}' cannot derive a build; use "
                              f"tune.build_search: full")
        with phase("build"):
            info = index.derive_from(source.index, self.ds.base)
        outcome = Outcome("off", info.build_s, note="derived")
        self.build_log.append({"backend": backend, "build": params.model_dump(mode="json"),
                               "build_threads": threads, **outcome.to_dict(),
                               "derived_from": source.build_dict})
        log.info("derived %s %s from %s in %.2f s", backend, params.model_dump(),
                 source.build_dict, info.build_s)
        built = BuiltIndex(backend, params, index, info, 0, outcome, threads)
        self._built[key] = built
        return built

    def release(self, built: BuiltIndex) -> None:
        """Close a built index and forget it."""
        built.index.close()
        self._built = {k: v for k, v in self._built.items() if v is not built}

    def close(self) -> None:
        for built in list(self._built.values()):
            built.index.close()
        self._built.clear()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- measuring ---------------------------------------------------------------------------
    def check_search(
        self, built: BuiltIndex, search: Mapping[str, Any] | SearchConfig
    ) -> SearchConfig:
        """``search`` checked for this build and k: a SearchConfig checked for them already is
        taken as is; anything else is validated (SearchParams, then check_combination)."""
        if isinstance(search, SearchConfig):
            if search.fits(built.backend, built.build, self.k):
                return search
            search = search.given
        return check_search(
            get_backend(built.backend), built.build, search, self.k,
            where=f"backend '{built.backend}' search params",
        )

    def measure(
        self,
        built: BuiltIndex,
        search: Mapping[str, Any] | SearchConfig,
        *,
        modes: Sequence[Mode] = MODES,
        query_idx: np.ndarray | None = None,
        query_set: str = "all",
        truth: StepTruth | None = None,
    ) -> list[Measurement]:
        """Measure one search config in each mode on the queries ``query_idx`` (default all),
        scored against the dataset's exact top-k, or against ``truth`` (a live step's)."""
        config = self.check_search(built, search)
        apply_search(built.index, config)
        qidx = np.arange(self.ds.n_queries) if query_idx is None else np.asarray(query_idx)
        if qidx.size == 0:
            raise ConfigError("no queries to measure (query subset is empty)")
        queries = np.ascontiguousarray(self.ds.queries[qidx])
        gt = self.gt.rows(qidx) if truth is None else truth.gt.rows(qidx)
        with phase("search"):
            out = self._measure_modes(built, config, modes, queries, gt, query_set, truth)
        return [dataclasses.replace(m, query_idx=qidx) for m in out]

    def _measure_modes(self, built: BuiltIndex, config: SearchConfig, modes: Sequence[Mode],
                       queries: np.ndarray, gt: GroundTruth, query_set: str,
                       truth: StepTruth | None = None) -> list[Measurement]:
        out = []
        self._warm_up(built.index, queries)
        for mode in modes:
            if mode == "single":
                res, lat = self._time_single(built.index, queries)
                qps = 1000.0 / float(lat.mean())
            elif mode == "batch":
                res, lat = self._time_batch(built.index, queries)
                qps = len(queries) / (float(lat.min()) / 1000.0)
            else:
                raise ConfigError(f"field 'mode' must be one of single, batch; received {mode!r}")
            out.append(
                self._measurement(built, config, mode, res, lat, qps, gt, queries, query_set,
                                  truth)
            )
        return out

    def _warm_up(self, index: IndexBackend, queries: np.ndarray) -> None:
        """Untimed: the first ``warmup`` queries one by one, then as one batch."""
        n = min(self.warmup, len(queries))
        warm_up(partial(index.search, k=self.k), [queries[i : i + 1] for i in range(n)], n)
        if n:
            index.search(queries[:n], self.k)

    def _time_single(
        self, index: IndexBackend, queries: np.ndarray
    ) -> tuple[SearchResult, np.ndarray]:
        """Each query timed alone (ms); rows are sliced before and merged after the timing."""
        nq, k = len(queries), self.k
        ids = np.full((nq, k), -1, dtype=np.int64)
        dists = np.full((nq, k), np.inf, dtype=np.float32)
        rows = [queries[i : i + 1] for i in range(nq)]
        if isinstance(index, SupportsHotSearch):
            call, finish = index.hot_search(k)  # only the library call is timed
            raws, lat_ms = time_each(call, rows)
            results = [finish(raw) for raw in raws]
        else:
            results, lat_ms = time_each(partial(index.search, k=k), rows)
        for i, r in enumerate(results):
            m = r.ids.shape[1]
            ids[i, :m] = r.ids[0]
            dists[i, :m] = r.distances[0]
        return SearchResult(ids, dists), lat_ms

    def _time_batch(
        self, index: IndexBackend, queries: np.ndarray
    ) -> tuple[SearchResult, np.ndarray]:
        """All queries in one call, ``batch_repeats`` times (ms per call)."""
        return time_repeat(partial(index.search, queries, self.k), self.batch_repeats)

    def _measurement(
        self,
        built: BuiltIndex,
        config: SearchConfig,
        mode: Mode,
        res: SearchResult,
        lat_ms: np.ndarray,
        qps: float,
        gt: GroundTruth,
        queries: np.ndarray,
        query_set: str,
        truth: StepTruth | None = None,
    ) -> Measurement:
        k = self.k
        ids = res.ids
        if ids.shape[1] < k:  # pad short results with "no result"
            pad = np.full((ids.shape[0], k - ids.shape[1]), -1, dtype=np.int64)
            ids = np.hstack([ids, pad])
        rec = per_query_recall(ids, gt.ids, k, live=truth is not None)
        if truth is None:
            rows = ids[:, :k]
        else:  # a live step: caller ids, fewer than k live vectors possible
            found = np.asarray(ids[:, :k], dtype=np.int64)
            rows = np.where(found >= 0, truth.rows(found), -1)
        rec_tie = recall_tie_aware(exact_distances(self.ds, rows, queries), gt.distances, k)
        return Measurement(
            backend=built.backend,
            build=built.build_dict,
            search=config.search.model_dump(mode="json"),
            mode=mode,
            k=k,
            per_query_recall=rec,
            per_query_recall_tie=rec_tie,
            latency_ms=np.asarray(lat_ms, dtype=np.float64),
            qps=float(qps),
            build_s=built.info.build_s,
            memory_bytes=built.memory_bytes,
            threads=self.threads,
            query_set=query_set,
            ids=ids[:, :k],
            extra={"rss_delta_bytes": built.rss_delta_bytes, "cache": built.outcome.cache,
                   "load_s": built.outcome.load_s, "build_threads": built.build_threads},
        )


def spec_cache_settings(spec: Any) -> CacheSettings:
    """The build-cache settings of a sweep spec's ``index_build``."""
    conf = spec.index_build
    return CacheSettings(enabled=conf.cache, max_mb=conf.cache_max_mb)
