"""The budget of a live sweep: every search on a user's collection goes through one
:class:`Pacer`, which keeps the rate at or under ``max_qps`` (searches a second), runs at most
``concurrency`` at once (one handle, so one connection, each) and stops the work past
``time_limit_s`` (wall seconds).
It counts what was spent (``queries``: live searches, ANN and exact alike; ``wall_s``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from retrieval.indexes.base import SearchResult
from retrieval.live.spec import BudgetSpec
from retrieval.phases import report

log = logging.getLogger(__name__)


class BudgetExhausted(Exception):
    """The sweep's ``time_limit_s`` passed: the work stops with what it measured."""


Search = Callable[[np.ndarray, int], SearchResult]


@dataclass
class Pacer:
    """Paces single-query searches to ``budget.max_qps`` (start times ``1 / max_qps`` s apart,
    whatever the number of workers); ``queries`` counts every search it ran."""

    budget: BudgetSpec
    clock: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep
    queries: int = 0
    started: float = field(default=0.0)
    _next: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.started = self.clock()
        self._next = self.started

    @property
    def wall_s(self) -> float:
        return self.clock() - self.started

    def left_s(self) -> float:
        return self.budget.time_limit_s - self.wall_s

    def _slot(self) -> float:
        """The start time of the next search (BudgetExhausted past the time limit)."""
        with self._lock:
            at = max(self.clock(), self._next)
            if at - self.started > self.budget.time_limit_s:
                raise BudgetExhausted(f"time_limit_s {self.budget.time_limit_s:g} s reached "
                                      f"after {self.queries} live searches")
            self._next = at + 1.0 / self.budget.max_qps
            return at

    def _one(self, search: Search, q: np.ndarray, k: int) -> tuple[SearchResult, float]:
        at = self._slot()
        now = self.clock()
        if now < at:
            self.sleep(at - now)
        t0 = self.clock()
        res = search(q, k)
        took = (self.clock() - t0) * 1000.0
        with self._lock:
            self.queries += 1
            done = self.queries
        report("live searches", done, 0, "paced searches on the live collection")
        return res, took

    def run(self, search: Search | Sequence[Search], queries: np.ndarray,
            k: int) -> tuple[SearchResult, np.ndarray]:
        """Each query searched alone, paced; (results, per-query latency in ms). ``search``:
        one callable, or one per worker (each its own handle / connection), at most
        ``budget.concurrency`` of them used at once. Raises :class:`BudgetExhausted` when the
        time limit passes before the last query."""
        workers = [search] if callable(search) else list(search)
        workers = workers[:max(1, self.budget.concurrency)]
        n = queries.shape[0]
        ids = np.full((n, k), -1, dtype=np.int64)
        dist = np.full((n, k), np.inf, dtype=np.float32)
        lat = np.zeros(n, dtype=np.float64)

        def put(i: int, res: SearchResult, took: float) -> None:
            m = min(k, res.ids.shape[1])
            ids[i, :m], dist[i, :m], lat[i] = res.ids[0, :m], res.distances[0, :m], took

        if len(workers) == 1:
            for i in range(n):
                put(i, *self._one(workers[0], queries[i:i + 1], k))
            return SearchResult(ids, dist), lat
        todo = iter(range(n))
        take, stop = threading.Lock(), threading.Event()

        def work(fn: Search) -> None:
            try:
                while not stop.is_set():
                    with take:
                        i = next(todo, None)
                    if i is None:
                        return
                    put(i, *self._one(fn, queries[i:i + 1], k))
            except BaseException:
                stop.set()  # the other workers stop at their next query
                raise

        with ThreadPoolExecutor(len(workers), thread_name_prefix="rwb-live") as pool:
            for fut in [pool.submit(work, fn) for fn in workers]:
                fut.result()  # BudgetExhausted or an engine error, after every worker stopped
        return SearchResult(ids, dist), lat


__all__ = ["BudgetExhausted", "Pacer"]
