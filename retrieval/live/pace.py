"""The budget of a live sweep: every search on a user's collection goes through one
:class:`Pacer`, which keeps the rate at or under ``max_qps`` (searches a second), runs them one at
a time (at most ``concurrency`` at once) and stops the work past ``time_limit_s`` (wall seconds).
It counts what was spent (``queries``: live searches, ANN and exact alike; ``wall_s``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from retrieval.indexes.base import SearchResult
from retrieval.live.spec import BudgetSpec

log = logging.getLogger(__name__)


class BudgetExhausted(Exception):
    """The sweep's ``time_limit_s`` passed: the work stops with what it measured."""


@dataclass
class Pacer:
    """Paces single-query searches to ``budget.max_qps``; ``latencies_ms`` of the last call."""

    budget: BudgetSpec
    clock: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep
    queries: int = 0
    started: float = field(default=0.0)
    _next: float = 0.0

    def __post_init__(self) -> None:
        self.started = self.clock()
        self._next = self.started

    @property
    def wall_s(self) -> float:
        return self.clock() - self.started

    def left_s(self) -> float:
        return self.budget.time_limit_s - self.wall_s

    def run(self, search: Callable[[np.ndarray, int], SearchResult], queries: np.ndarray,
            k: int) -> tuple[SearchResult, np.ndarray]:
        """``search`` of each query alone, paced; (results, per-query latency in ms). Raises
        :class:`BudgetExhausted` when the time limit passes before the last query."""
        step = 1.0 / self.budget.max_qps
        ids, dist, lat = [], [], np.zeros(queries.shape[0], dtype=np.float64)
        for i in range(queries.shape[0]):
            now = self.clock()
            if max(now, self._next) - self.started > self.budget.time_limit_s:
                raise BudgetExhausted(f"time_limit_s {self.budget.time_limit_s:g} s reached "
                                      f"after {self.queries} live searches")
            if now < self._next:
                self.sleep(self._next - now)
            t0 = self.clock()
            res = search(queries[i:i + 1], k)
            t1 = self.clock()
            self._next = max(t0, self._next) + step
            self.queries += 1
            lat[i] = (t1 - t0) * 1000.0
            ids.append(res.ids)
            dist.append(res.distances)
        if not ids:
            empty = np.zeros((0, k))
            return SearchResult(empty.astype(np.int64), empty.astype(np.float32)), lat
        return SearchResult(np.concatenate(ids), np.concatenate(dist)), lat


__all__ = ["BudgetExhausted", "Pacer"]
