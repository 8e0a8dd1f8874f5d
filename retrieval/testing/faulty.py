"""A fault-injecting index for testing load harnesses: a fixed service time, a periodic stall,
a bounded number of server workers, and a server that dies after a while.

Importing this module registers backend ``"fault"`` (outside ``retrieval.indexes``, so never
discovered by default; the load spec imports it when a config names it).

Answers are exact (Faiss ``IndexFlat``, recall 1.0) unless ``exact: false`` (then every call
returns "no result" at once: an instant backend for measuring the load generator itself). The
timing model, all in milliseconds of wall time measured from the end of :meth:`build`:

- ``workers`` calls are served at once (more concurrent calls wait inside in arrival order,
  first come first served, like a server with that many worker threads and one queue);
- a served call holds its worker for ``service_ms`` (``time.sleep``: no CPU, the GIL released);
- ``stall_ms`` once per ``stall_every_s``: during ``[n * every, n * every + stall)`` nothing is
  served (a call that gets its worker inside the window first waits for the window to end);
- ``die_after_s`` (> 0): from then on every call raises :class:`BackendError` ("server gone"),
  a server that died mid-run;
- ``die_when_concurrent`` (> 0): the same death, triggered by a state instead of a time: once
  that many calls are inside the backend at once (e.g. 2: during the first point with two
  clients), whatever the machine's speed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import numpy as np
from pydantic import Field

from retrieval.engines.faiss import common as fc
from retrieval.errors import BackendError
from retrieval.indexes.inprocess import InProcessIndex, check_k
from retrieval.indexes.registry import register
from retrieval.params import Params


class FifoSlots:
    """A counting semaphore that serves waiters first come, first served (Python's own
    Semaphore is unfair: a releasing thread often takes the slot straight back)."""

    def __init__(self, n: int) -> None:
        self._lock = threading.Lock()
        self._free = n
        self._waiters: deque[threading.Event] = deque()

    def __enter__(self) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            ev = threading.Event()
            self._waiters.append(ev)
        ev.wait()  # the releasing thread handed its slot to us

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()
            else:
                self._free += 1


class FaultBuild(Params):
    """Service time, stall and death of the fault backend (ms / s as named)."""

    service_ms: float = Field(1.0, ge=0.0, le=60_000.0)
    stall_ms: float = Field(0.0, ge=0.0, le=60_000.0)
    stall_every_s: float = Field(1.0, gt=0.0, le=3600.0)
    workers: int = Field(1, ge=1, le=4096)
    die_after_s: float = Field(0.0, ge=0.0, le=86_400.0, description="0: never")
    die_when_concurrent: int = Field(0, ge=0, le=4096, description="0: never")
    exact: bool = True


class FaultSearch(Params):
    pass


@register
class FaultIndex(InProcessIndex):
    name = "fault"
    family = "flat"
    BuildParams = FaultBuild
    SearchParams = FaultSearch
    requires = ("faiss",)
    deterministic = True

    _flat: Any = None
    _t0_ns: int = 0
    _slots: FifoSlots | None = None
    _in_flight: int = 0
    _dead: bool = False
    _count_lock: Any = None

    @classmethod
    def library_version(cls) -> str:
        return f"fault (faiss {fc.version()})"

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        check_k(k, f"backend '{cls.name}' search params")

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        p = self.build_params
        assert isinstance(p, FaultBuild)
        faiss = fc.faiss_module()
        flat = faiss.IndexFlatL2(self.dim) if self.metric == "l2" else faiss.IndexFlatIP(self.dim)
        flat.add(fc.prepare(x, self.metric))
        self._flat = flat
        self._slots = FifoSlots(p.workers)
        self._in_flight, self._dead, self._count_lock = 0, False, threading.Lock()
        self._t0_ns = time.perf_counter_ns()
        return {"workers": p.workers}

    def stall_wait_s(self, now_ns: int) -> float:
        """Seconds until the current stall window ends (0 outside a window)."""
        p = self.build_params
        assert isinstance(p, FaultBuild)
        if p.stall_ms <= 0:
            return 0.0
        every_ns = int(p.stall_every_s * 1e9)
        phase = (now_ns - self._t0_ns) % every_ns
        stall_ns = int(p.stall_ms * 1e6)
        return (stall_ns - phase) / 1e9 if phase < stall_ns else 0.0

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        p = self.build_params
        assert isinstance(p, FaultBuild)
        if p.die_when_concurrent <= 0:
            return self._served(x, k)
        with self._count_lock:
            self._in_flight += 1
            if self._in_flight >= p.die_when_concurrent:
                self._dead = True
        try:
            if self._dead:
                raise BackendError("backend 'fault': server gone (die_when_concurrent reached)")
            return self._served(x, k)
        finally:
            with self._count_lock:
                self._in_flight -= 1

    def _served(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        p = self.build_params
        assert isinstance(p, FaultBuild) and self._slots is not None
        if p.die_after_s > 0 and time.perf_counter_ns() - self._t0_ns >= p.die_after_s * 1e9:
            raise BackendError("backend 'fault': server gone (die_after_s reached)")
        if not p.exact:
            return (np.full((x.shape[0], k), np.inf, dtype=np.float32),
                    np.full((x.shape[0], k), -1, dtype=np.int64))
        with self._slots:
            wait = self.stall_wait_s(time.perf_counter_ns())
            if wait > 0:
                time.sleep(wait)
            if p.service_ms > 0:
                time.sleep(p.service_ms / 1000.0)
            d, i = self._flat.search(fc.prepare(x, self.metric), k)
        res = fc.to_result(d, i, self.metric)
        return res.distances, res.ids

    def memory_bytes(self) -> int:
        """Serialized size (bytes) of the brute-force Faiss index it holds."""
        return 0 if self._flat is None else fc.serialized_bytes(self._flat)

    def _release(self) -> None:
        self._flat = None


__all__ = ["FaultBuild", "FaultIndex", "FaultSearch", "FifoSlots"]
