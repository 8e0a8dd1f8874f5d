"""Plumbing shared by the in-process backends (not a backend: no ``register`` here).

:class:`InProcessIndex` validates every input once (dimension, metric, ids, k, search-before-
build, use-after-close) and runs the cross-field checks before each search (except for a config
already checked by :mod:`retrieval.indexes.entry`, see :meth:`InProcessIndex.use_search`), so
each backend module only translates parameters and calls its library. Internally a backend
numbers vectors ``0..n-1`` (their row position); custom ids are mapped on the way out.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retrieval.data import Metric, as_matrix, check_metric
from retrieval.errors import ConfigError, DataError, param_error, unknown_name_error
from retrieval.indexes.base import BuildInfo, IndexBackend, SearchResult
from retrieval.indexes.entry import SearchConfig
from retrieval.params import Params

log = logging.getLogger(__name__)
_isfinite = math.isfinite

#: largest seed accepted (libraries take unsigned 32-bit seeds)
SEED_MAX = 2**32 - 1
THREADS_MAX = 1024


def check_k(k: object, where: str) -> int:
    """``k`` must be an integer >= 1 (bool is rejected)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or int(k) < 1:
        raise param_error("k", "an integer >= 1", k, where=where)
    return int(k)


def check_ids(ids: object, n: int, where: str) -> np.ndarray:
    """Custom ids: 1-d, one per vector, integers in [0, 2**63), unique. Returns int64."""
    arr = np.asarray(ids)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise DataError(f"{where}: ids must be a 1-d array of {n} ids (one per vector); "
                        f"received shape {arr.shape}")
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"{where}: ids must be integers; received dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.unsignedinteger) and n and int(arr.max()) >= 2**63:
        raise DataError(f"{where}: ids must be < 2**63 (int64); received {int(arr.max())}")
    out = arr.astype(np.int64)
    if n and int(out.min()) < 0:
        bad = int(np.argmax(out < 0))
        raise DataError(f"{where}: ids must be >= 0 (-1 means 'no result'); received "
                        f"{int(out[bad])} at position {bad}")
    uniq, counts = np.unique(out, return_counts=True)
    if uniq.shape[0] != n:
        dup = int(uniq[np.argmax(counts > 1)])
        raise DataError(f"{where}: ids must be unique; received id {dup} "
                        f"{int(counts.max())} times")
    return out


def unknown_knob(cls: type[IndexBackend], knob: str) -> ConfigError:
    return unknown_name_error("knob", knob, cls.monotone_knobs, where=f"backend '{cls.name}'")


class InProcessIndex(IndexBackend):
    """Base of the in-process backends: input checks, id mapping, timing, close.

    Subclasses implement :meth:`_build` (vectors already validated and prepared for the metric,
    numbered by row) and :meth:`_search` (returns rwb distances and row numbers, -1 for none), and
    :meth:`memory_bytes`.
    """

    #: whether ``seed`` and one thread make the build reproducible
    deterministic: ClassVar[bool] = True
    #: whether :meth:`_build` reads a memory-mapped base through :func:`base_chunks` (float32
    #: chunk by chunk); else a mapped base of another dtype (uint8 ``.bvecs``) is converted to
    #: float32 whole before :meth:`_build` (:func:`as_matrix`)
    reads_chunks: ClassVar[bool] = False

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
        where = f"backend '{self.name}'"
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or int(dim) < 1:
            raise param_error("dim", "an integer >= 1", dim, where=where)
        check_metric(metric, where=where)
        if build is not None and not isinstance(build, self.BuildParams):
            raise param_error("build", f"a {self.BuildParams.__name__}", build, where=where)
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not (
            0 <= int(seed) <= SEED_MAX
        ):
            raise param_error("seed", f"an integer in [0, {SEED_MAX}]", seed, where=where)
        if isinstance(threads, bool) or not isinstance(threads, int | np.integer) or not (
            1 <= int(threads) <= THREADS_MAX
        ):
            raise param_error("threads", f"an integer in [1, {THREADS_MAX}]", threads, where=where)
        super().__init__(int(dim), metric, build, seed=int(seed), threads=int(threads),
                         workdir=workdir)
        self._ids: np.ndarray | None = None
        self._n = 0
        self._built = False
        self._checked_k = -1
        #: k for which check_combination already passed on the current search params
        self._trusted_k = -1
        #: threads of the build (default: the search threads); see :meth:`set_build_threads`
        self.build_threads = self.threads
        self.check_build_params(self.build_params, self.dim)

    def set_build_threads(self, n: int) -> None:
        """Threads for :meth:`build` only (searches keep ``threads``); more than one makes the
        build irreproducible (see :class:`retrieval.indexes.base.SupportsBuildThreads`)."""
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or not (
            1 <= int(n) <= THREADS_MAX
        ):
            raise param_error("build_threads", f"an integer in [1, {THREADS_MAX}]", n,
                              where=self._where())
        self.build_threads = int(n)

    # --- hooks for subclasses ----------------------------------------------------------------
    @classmethod
    def check_build_params(cls, build: Params, dim: int) -> None:
        """Checks that need the dimension (e.g. dim % pq_m == 0); raise ConfigError."""

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        """Build from ``x`` (float32, prepared); return extra facts for BuildInfo."""
        raise NotImplementedError

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Return (distances float32 in rwb convention, row numbers int64 with -1), (nq, k)."""
        raise NotImplementedError

    def _release(self) -> None:
        """Free the library objects."""

    def memory_bytes(self) -> int:
        raise NotImplementedError

    # --- protocol ------------------------------------------------------------------------------
    def _where(self) -> str:
        return f"backend '{self.name}'"

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigError(f"{self._where()}: index is closed; create a new one")

    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> BuildInfo:
        """Build from ``vectors`` (n, dim); ``ids`` optional int64 ids >= 0 (default row
        numbers). ``build_s`` in seconds; ``memory_bytes`` see :meth:`memory_bytes`."""
        self._check_open()
        x = as_matrix(vectors, f"{self._where()} build vectors", dim=self.dim,
                      mapped=self.reads_chunks)
        custom = None if ids is None else check_ids(ids, x.shape[0], f"{self._where()} build")
        self._checked_k = -1
        if self._built:
            self._release()
            self._built = False
        t0 = time.perf_counter_ns()
        extra = self._build(x)
        build_s = (time.perf_counter_ns() - t0) / 1e9
        self._ids = custom
        self._n = int(x.shape[0])
        self._built = True
        mem = self.memory_bytes()
        log.debug("%s built n=%d in %.3f s (%d bytes)", self.name, self._n, build_s, mem)
        return BuildInfo(n=self._n, build_s=build_s, memory_bytes=mem, extra=extra)

    def _adopt(self, n: int, build_s: float, extra: dict[str, Any]) -> BuildInfo:
        """Mark this index built over ``n`` rows by other means than :meth:`build` (a derived
        build: ``_build`` was replaced by the caller's own fill)."""
        self._checked_k = -1
        self._ids = None
        self._n = int(n)
        self._built = True
        return BuildInfo(n=self._n, build_s=build_s, memory_bytes=self.memory_bytes(),
                         extra=extra)

    def set_search_params(self, params: Params | None = None, /, **kw: Any) -> None:
        """Keyword params (merged with the current ones and validated; unknown keys raise), or
        one instance of this backend's SearchParams, taken as is (it is validated already).
        The cross-field check runs on the next search."""
        if params is None:
            self._checked_k = self._trusted_k = -1
            super().set_search_params(**kw)
            return
        if kw:
            raise ConfigError(f"{self._where()}: set_search_params takes a "
                              f"{self.SearchParams.__name__} or keyword params, not both")
        self._take(params, trusted_k=-1)

    def use_search(self, config: SearchConfig) -> None:
        """A config checked by :mod:`retrieval.indexes.entry`: its SearchParams are taken as
        is and, when it was checked against this index's build, check_combination does not run
        again for its ``k`` (see :class:`~retrieval.indexes.entry.SupportsCheckedSearch`)."""
        trusted = config.k if config.fits(self.name, self.build_params, config.k) else -1
        self._take(config.search, trusted_k=trusted)

    def _take(self, params: Params, *, trusted_k: int) -> None:
        if not isinstance(params, self.SearchParams):
            raise param_error("search params", f"a {self.SearchParams.__name__} or keyword "
                              f"params", params, where=self._where())
        self._checked_k = -1
        self._trusted_k = trusted_k
        self.search_params = params
        self._apply_search_params()

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-``k`` per query: ids int64 (-1 = none), distances float32 ascending (rwb
        convention, +inf where id is -1).

        Hot path: a C-contiguous float32 (nq, dim) array with the same ``k`` as the previous
        call skips the re-validation (only a finiteness check remains), so the measured latency
        is the library's, not rwb's.
        """
        x = queries
        if not (
            k == self._checked_k
            and type(x) is np.ndarray
            and x.dtype == np.float32
            and x.ndim == 2
            and x.shape[1] == self.dim
            and x.shape[0] > 0
            and x.flags.c_contiguous
            and _isfinite(x.sum())
        ):
            x = self._validated_queries(queries, k)
        d, i = self._search(x, k)
        if self._ids is not None:
            i = np.where(i >= 0, self._ids[np.maximum(i, 0)], -1)
        return SearchResult(ids=i, distances=d)

    def hot_search(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], SearchResult]]:
        """See :class:`retrieval.indexes.base.SupportsHotSearch`: checks once, then the timed
        call is the backend's :meth:`_hot` (the bare library call where one is defined)."""
        self._validated_queries(np.zeros((1, self.dim), dtype=np.float32), k)
        call, raw_to_rows = self._hot(k)

        def finish(raw: Any) -> SearchResult:
            d, i = raw_to_rows(raw)
            if self._ids is not None:
                i = np.where(i >= 0, self._ids[np.maximum(i, 0)], -1)
            return SearchResult(ids=i, distances=d)

        return call, finish

    def _hot(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
        """(library call on a prepared row, raw output -> (distances, row numbers)); backends
        override this with their bare library call."""
        search = self._search
        return (lambda x: search(x, k)), (lambda raw: raw)

    def _validated_queries(self, queries: np.ndarray, k: int) -> np.ndarray:
        where = self._where()
        self._check_open()
        if not self._built:
            raise ConfigError(f"{where}: search() called before build()")
        k = check_k(k, f"{where} search")
        x = as_matrix(queries, f"{where} queries", dim=self.dim)
        if k != self._trusted_k:
            self.check_combination(self.build_params, self.search_params, k)
        self._checked_k = k
        return x

    def close(self) -> None:
        """Free the index; idempotent. Search or build after close raises ConfigError."""
        self._checked_k = self._trusted_k = -1
        if self._built:
            self._release()
            self._built = False
        super().close()


class SnapshotIndex(InProcessIndex):
    """An in-process backend with a native on-disk format (see
    :class:`retrieval.indexes.base.SupportsSnapshot`): subclasses write and read the library's
    own files in :meth:`_save_files` / :meth:`_load_files`; custom ids travel as ``ids.npy``
    (numpy's format, ``allow_pickle=False``)."""

    snapshot_format: ClassVar[str] = ""

    def _save_files(self, folder: Path) -> list[str]:
        raise NotImplementedError

    def _load_files(self, folder: Path, n: int) -> None:
        """Read the library files into the library object; DataError when they do not hold
        ``n`` vectors of dimension ``dim`` (or the library refuses them)."""
        raise NotImplementedError

    def save_snapshot(self, folder: Path) -> list[str]:
        """Write the built index into ``folder``; returns the file names written."""
        self._check_open()
        if not self._built:
            raise ConfigError(f"{self._where()}: save_snapshot() called before build()")
        names = self._save_files(folder)
        if self._ids is not None:
            np.save(folder / "ids.npy", self._ids, allow_pickle=False)
            names.append("ids.npy")
        return names

    def load_snapshot(self, folder: Path, n: int) -> None:
        """Become the index saved in ``folder`` (``n`` vectors); DataError if it is not that."""
        self._check_open()
        if self._built:
            self._release()
            self._built = False
        self._checked_k = self._trusted_k = -1
        ids = None
        if (folder / "ids.npy").is_file():
            ids = np.load(folder / "ids.npy", allow_pickle=False)
            if ids.dtype != np.int64 or ids.shape != (n,):
                raise DataError(f"{self._where()}: snapshot ids.npy holds {ids.dtype} "
                                f"{ids.shape}, expected int64 ({n},)")
        try:
            self._load_files(folder, n)
        except (RuntimeError, ValueError, OSError) as exc:  # the library refused the file
            self._release()
            raise DataError(f"{self._where()}: snapshot in {folder} not readable: "
                            f"{type(exc).__name__}: {exc}") from exc
        self._ids = ids
        self._n = int(n)
        self._built = True
