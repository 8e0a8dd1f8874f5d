"""Query several collections at once and fuse their answers.

Each :class:`Member` is one collection in its own index (any backend). :class:`FanOut` sends a
query vector to every member and fuses the answers (:mod:`retrieval.fusion`), in one of three
modes:

- ``serial``: one member after the other, in the calling thread;
- ``threads``: one task per member on a thread pool (helps only when the backend releases the
  GIL - hnswlib and faiss do - or waits on another process);
- ``asyncio``: one task per member on an event loop; a member whose index has an async search
  (:class:`retrieval.indexes.SupportsAsyncSearch`, e.g. Milvus through pymilvus's
  AsyncMilvusClient) is awaited directly, any other runs in ``asyncio.to_thread``.

Failure isolation: a member that raises (closed index, server gone) or misses its deadline
(``timeout_s``, seconds, per member) yields a :class:`CollectionAnswer` with ``error`` set and
no results; the other members still answer and are fused. In ``serial`` mode a call cannot be
interrupted, so the deadline is checked when it returns (late results are dropped, not used);
in ``threads``/``asyncio`` the caller stops waiting at the deadline (the call itself may run on
in its thread).

Doc keys in fused lists are ``"<namespace>/<doc id>"`` (the namespace defaults to the member
name; members sharing one are deduplicated by doc id). Scores are ``-distance`` (higher is
better; see :func:`retrieval.fusion.from_distances`); fused RRF scores are RRF sums.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from retrieval.data import Metric
from retrieval.errors import ConfigError, param_error, unknown_name_error
from retrieval.fusion import DEFAULT_RRF_K, from_distances, rrf, rrf_weights, score_merge
from retrieval.indexes.base import SupportsAsyncSearch, VectorIndex
from retrieval.timing import timed

log = logging.getLogger(__name__)

Mode = Literal["serial", "threads", "asyncio"]
MODES: tuple[str, ...] = ("serial", "threads", "asyncio")
Fusion = Literal["rrf", "score"]
FUSIONS: tuple[str, ...] = ("rrf", "score")


@dataclass(frozen=True, eq=False)
class Member:
    """One collection in one index.

    ``doc_ids[i]`` is the doc id of index id ``i`` (the index is built with ids ``0..n-1``).
    ``timeout_s`` (seconds) overrides the fan-out's default deadline for this member.
    ``use_async`` lets the asyncio mode await the index's own async search when it has one.
    ``namespace`` (default: ``name``) prefixes doc keys (``"<namespace>/<doc id>"``): members
    sharing a namespace share doc ids, so a doc found by several of them (replicas, overlapping
    shards) is fused once - RRF adds its contributions, score merge keeps its best score.
    """

    name: str
    index: VectorIndex
    dim: int
    metric: Metric
    doc_ids: Sequence[str]
    backend: str = ""
    weight: float = 1.0
    timeout_s: float | None = None
    use_async: bool = True
    namespace: str | None = None

    @property
    def key_prefix(self) -> str:
        return f"{self.namespace if self.namespace is not None else self.name}/"


@dataclass(frozen=True)
class CollectionAnswer:
    """One member's answer to one query. ``ms``: milliseconds its search call took, from the
    moment the call started (in whatever thread or task runs it) to its return, or to the
    deadline for a timeout. ``error``: one line, None when it answered in time."""

    name: str
    ranked: list[tuple[str, float]]
    ms: float
    error: str | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class FanoutAnswer:
    """All members' answers to one query and the fused top-k. ``ms``: milliseconds from sending
    the query to having the fused list (fusion included)."""

    answers: dict[str, CollectionAnswer]
    fused: list[tuple[str, float]]
    ms: float

    @property
    def failures(self) -> dict[str, str]:
        return {n: a.error for n, a in self.answers.items() if a.error is not None}


@dataclass(frozen=True)
class FanoutRun:
    """A timed run of many queries in one mode.

    ``latency_ms``: per query (ms). Seconds over the timed queries: ``wall_s`` wall time;
    ``cpu_s`` CPU time of this process (all threads); ``wait_s`` time its threads were runnable
    but waiting for a core (Linux schedstat run delay: contention from other processes or too
    many threads; NaN where unknown); ``child_cpu_s``/``child_wait_s`` the same for child
    processes (e.g. a Milvus Lite server started by this process).
    """

    mode: str
    answers: list[FanoutAnswer]
    latency_ms: np.ndarray
    wall_s: float
    cpu_s: float
    child_cpu_s: float
    member_ms: dict[str, np.ndarray] = field(default_factory=dict)
    wait_s: float = float("nan")
    child_wait_s: float = float("nan")

    def failures(self) -> dict[str, dict[str, Any]]:
        """Per member: errors, timeouts and the first error message."""
        out: dict[str, dict[str, Any]] = {}
        for ans in self.answers:
            for name, a in ans.answers.items():
                if a.error is None:
                    continue
                f = out.setdefault(name, {"errors": 0, "timeouts": 0, "first_error": a.error})
                f["timeouts" if a.timed_out else "errors"] += 1
        return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def check_members(members: Sequence[Member], *, fusion: str = "rrf",
                  query_dim: int | None = None) -> None:
    """Names unique, one embedding dimension for all (ConfigError naming each member's), one
    metric when fusing by score (scores must be comparable)."""
    if not members:
        raise ConfigError("fan-out: at least one collection is required")
    names = [m.name for m in members]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"fan-out: collection names must be unique; repeated: {', '.join(dup)}")
    dims = {m.name: int(m.dim) for m in members}
    if len(set(dims.values())) > 1 or (query_dim is not None and
                                        {query_dim} != set(dims.values())):
        listed = ", ".join(f"{n}={d}" for n, d in dims.items())
        q = f"; query vectors have {query_dim}" if query_dim is not None else ""
        raise ConfigError(
            f"fan-out: collections have different embedding dimensions ({listed}{q}); one "
            f"query vector must fit all: embed every collection with the same model"
        )
    if fusion not in FUSIONS:
        raise unknown_name_error("fusion", fusion, FUSIONS, where="fan-out")
    metrics = {m.name: m.metric for m in members}
    if fusion == "score" and len(set(metrics.values())) > 1:
        listed = ", ".join(f"{n}={v}" for n, v in metrics.items())
        raise ConfigError(
            f"fan-out: fusion 'score' needs comparable scores but the collections use different "
            f"metrics ({listed}); use fusion 'rrf'"
        )
    for m in members:
        if m.timeout_s is not None and not m.timeout_s > 0:
            raise param_error("timeout_s", "> 0 seconds", m.timeout_s,
                              where=f"fan-out collection '{m.name}'")


class FanOut:
    """Search every member for one query vector and fuse the answers (see the module doc).

    ``k``: results per member and in the fused list. ``timeout_s``: default per-member deadline
    in seconds. ``fusion``: "rrf" (``rrf_k``, member weights) or "score" (global top-k by score).
    ``caller_runs``: in ``threads`` mode the calling thread searches the first member itself
    while the pool serves the others (one thread hand-off fewer per query; that member's
    deadline is then checked when it returns, as in ``serial`` mode).
    """

    def __init__(
        self,
        members: Sequence[Member],
        k: int = 10,
        *,
        timeout_s: float = 5.0,
        fusion: Fusion = "rrf",
        rrf_k: float = DEFAULT_RRF_K,
        workers: int | None = None,
        caller_runs: bool = True,
    ) -> None:
        check_members(members, fusion=fusion)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise param_error("k", "an integer >= 1", k, where="fan-out")
        if not timeout_s > 0:
            raise param_error("timeout_s", "> 0 seconds", timeout_s, where="fan-out")
        self.members = list(members)
        self.k = k
        self.timeout_s = float(timeout_s)
        self.fusion: Fusion = fusion
        self.rrf_k = rrf_k
        self.weights = rrf_weights([m.name for m in members], {m.name: m.weight for m in members})
        self.dim = int(members[0].dim)
        self._workers = workers or max(2, 2 * len(members))
        self.caller_runs = bool(caller_runs) and len(members) > 1
        self._pool: cf.ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    # --- helpers ---------------------------------------------------------------------------
    def _deadline(self, m: Member) -> float:
        return float(m.timeout_s if m.timeout_s is not None else self.timeout_s)

    def _query(self, q: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(np.asarray(q, dtype=np.float32).reshape(1, -1))
        if x.shape[1] != self.dim:
            check_members(self.members, fusion=self.fusion, query_dim=int(x.shape[1]))
        return x

    def _ranked(self, m: Member, res: Any) -> list[tuple[str, float]]:
        return from_distances(res.ids[0], res.distances[0], keys=m.doc_ids, prefix=m.key_prefix)

    def _search_sync(self, m: Member, x: np.ndarray) -> CollectionAnswer:
        t0 = time.perf_counter_ns()
        try:
            res = m.index.search(x, self.k)
            ranked = self._ranked(m, res)
        except Exception as exc:
            ms = (time.perf_counter_ns() - t0) / 1e6
            return CollectionAnswer(m.name, [], ms, error=_one_line(exc))
        ms = (time.perf_counter_ns() - t0) / 1e6
        return CollectionAnswer(m.name, ranked, ms)

    def fuse(self, answers: Mapping[str, CollectionAnswer]) -> list[tuple[str, float]]:
        """Fused top-k of the members that answered."""
        lists = {n: a.ranked for n, a in answers.items() if a.ok}
        if not lists:
            return []
        if self.fusion == "score":
            return score_merge(lists, self.k)
        return rrf(lists, self.k, rrf_k=self.rrf_k, weights={n: self.weights[n] for n in lists})

    def _late(self, m: Member, ans: CollectionAnswer) -> CollectionAnswer:
        limit = self._deadline(m)
        if ans.ok and ans.ms > limit * 1e3:
            return CollectionAnswer(m.name, [], ans.ms, error=f"timed out after {limit:g} s "
                                    f"(answered in {ans.ms / 1e3:.3g} s; result dropped)",
                                    timed_out=True)
        return ans

    # --- modes ---------------------------------------------------------------------------
    def search(self, query: np.ndarray, mode: Mode = "serial") -> FanoutAnswer:
        """Fan one query vector out in ``mode`` ("serial", "threads" or "asyncio")."""
        if mode == "asyncio":
            return self._event_loop().run_until_complete(self.asearch(query))
        x = self._query(query)
        t0 = time.perf_counter_ns()
        if mode == "serial":
            answers = {m.name: self._late(m, self._search_sync(m, x)) for m in self.members}
        elif mode == "threads":
            answers = self._threads(x, t0)
        else:
            raise unknown_name_error("fan-out mode", str(mode), MODES)
        fused = self.fuse(answers)
        return FanoutAnswer(answers, fused, (time.perf_counter_ns() - t0) / 1e6)

    def _pool_get(self) -> cf.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = cf.ThreadPoolExecutor(self._workers, thread_name_prefix="rwb-fanout")
            return self._pool

    def _threads(self, x: np.ndarray, t0: int) -> dict[str, CollectionAnswer]:
        pool = self._pool_get()
        rest = self.members[1:] if self.caller_runs else self.members
        futures = {m.name: pool.submit(self._search_sync, m, x) for m in rest}
        answers: dict[str, CollectionAnswer] = {}
        if self.caller_runs:  # the calling thread takes one member instead of idling
            first = self.members[0]
            answers[first.name] = self._late(first, self._search_sync(first, x))
        for m in rest:
            fut = futures[m.name]
            left = self._deadline(m) - (time.perf_counter_ns() - t0) / 1e9
            try:
                answers[m.name] = fut.result(timeout=max(left, 0.0))
            except cf.TimeoutError:
                ms = (time.perf_counter_ns() - t0) / 1e6
                answers[m.name] = CollectionAnswer(
                    m.name, [], ms, error=f"timed out after {self._deadline(m):g} s",
                    timed_out=True)
        return answers

    async def _asearch_one(self, m: Member, x: np.ndarray) -> CollectionAnswer:
        limit = self._deadline(m)
        t0 = time.perf_counter_ns()
        try:
            if m.use_async and isinstance(m.index, SupportsAsyncSearch):
                res = await asyncio.wait_for(m.index.asearch(x, self.k), limit)
                ranked = self._ranked(m, res)
            else:
                return await asyncio.wait_for(asyncio.to_thread(self._search_sync, m, x), limit)
        except TimeoutError:
            ms = (time.perf_counter_ns() - t0) / 1e6
            return CollectionAnswer(m.name, [], ms, error=f"timed out after {limit:g} s",
                                    timed_out=True)
        except Exception as exc:
            ms = (time.perf_counter_ns() - t0) / 1e6
            return CollectionAnswer(m.name, [], ms, error=_one_line(exc))
        return CollectionAnswer(m.name, ranked, (time.perf_counter_ns() - t0) / 1e6)

    async def asearch(self, query: np.ndarray) -> FanoutAnswer:
        """The asyncio mode for one query; await it from any running event loop (``search(q,
        "asyncio")`` runs it on the fan-out's private loop and cannot be called from inside a
        running loop)."""
        x = self._query(query)
        t0 = time.perf_counter_ns()
        got = await asyncio.gather(*(self._asearch_one(m, x) for m in self.members))
        answers = {a.name: a for a in got}
        fused = self.fuse(answers)
        return FanoutAnswer(answers, fused, (time.perf_counter_ns() - t0) / 1e6)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """One private loop for the asyncio mode, so async clients bound to it are reused."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
            return self._loop

    # --- timed runs ------------------------------------------------------------------------
    def run(self, queries: np.ndarray, mode: Mode, *, warmup: int = 0) -> FanoutRun:
        """Answer each query in turn in ``mode``; the first ``warmup`` queries (cycled from the
        start) are answered first and not timed."""
        if mode not in MODES:
            raise unknown_name_error("fan-out mode", str(mode), MODES)
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim != 2 or q.shape[0] == 0:
            raise param_error("queries", "a non-empty (n, dim) matrix", q.shape, where="fan-out")
        if mode == "asyncio":
            return self._event_loop().run_until_complete(self._arun(q, warmup))
        for i in range(warmup):
            self.search(q[i % len(q)], mode)
        before = CpuSample.now()
        with timed() as wall:  # gc paused while the queries are answered
            answers = [self.search(row, mode) for row in q]
        return self._finish(mode, answers, wall.s, before)

    async def _arun(self, q: np.ndarray, warmup: int) -> FanoutRun:
        for i in range(warmup):
            await self.asearch(q[i % len(q)])
        before = CpuSample.now()
        with timed() as wall:
            answers = [await self.asearch(row) for row in q]
        return self._finish("asyncio", answers, wall.s, before)

    def _finish(self, mode: str, answers: list[FanoutAnswer], wall_s: float,
                before: CpuSample) -> FanoutRun:
        d = CpuSample.now().minus(before)
        lat = np.array([a.ms for a in answers], dtype=np.float64)
        member_ms = {
            m.name: np.array([a.answers[m.name].ms for a in answers]) for m in self.members
        }
        return FanoutRun(mode, answers, lat, wall_s, d.cpu_s, d.child_cpu_s, member_ms,
                         wait_s=d.wait_s, child_wait_s=d.child_wait_s)

    def close(self, *, close_indexes: bool = False) -> None:
        """Stop the thread pool and the private event loop. With ``close_indexes`` the members'
        indexes are closed first, while the loop still runs (an async client bound to it, such
        as Milvus's, is then closed inside its own loop)."""
        if close_indexes:
            for m in self.members:
                try:
                    m.index.close()
                except Exception as exc:  # closing must not hide the other members
                    log.warning("fan-out: closing '%s' failed: %s", m.name, _one_line(exc))
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    def __enter__(self) -> FanOut:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _schedstat(pid: int) -> tuple[float, float] | None:
    """(CPU s, run-queue wait s) summed over the live threads of ``pid`` (Linux schedstat)."""
    cpu = wait = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as fh:
                fields = fh.read().split()
        except OSError:
            continue  # the thread ended meanwhile
        cpu += int(fields[0])
        wait += int(fields[1])
    return cpu / 1e9, wait / 1e9


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU and run-queue wait seconds of this process and its children."""

    cpu_s: float
    wait_s: float
    child_cpu_s: float
    child_wait_s: float

    @classmethod
    def now(cls) -> CpuSample:
        own = _schedstat(os.getpid())
        wait = own[1] if own is not None else math.nan
        child_cpu = child_wait = 0.0
        try:
            import psutil

            children = psutil.Process().children(recursive=True)
        except Exception:  # psutil missing or /proc unreadable: children unknown
            children = []
        for child in children:
            st = _schedstat(child.pid)
            if st is not None:
                child_cpu += st[0]
                child_wait += st[1]
            else:
                with contextlib.suppress(Exception):
                    t = child.cpu_times()
                    child_cpu += t.user + t.system
                child_wait = math.nan
        # process_time counts threads that ended too; schedstat only live ones
        return cls(time.process_time(), wait, child_cpu, child_wait)

    def minus(self, other: CpuSample) -> CpuSample:
        return CpuSample(self.cpu_s - other.cpu_s, self.wait_s - other.wait_s,
                         max(self.child_cpu_s - other.child_cpu_s, 0.0),
                         max(self.child_wait_s - other.child_wait_s, 0.0))


__all__ = [
    "FUSIONS",
    "MODES",
    "CollectionAnswer",
    "CpuSample",
    "FanOut",
    "FanoutAnswer",
    "FanoutRun",
    "Member",
    "check_members",
]
