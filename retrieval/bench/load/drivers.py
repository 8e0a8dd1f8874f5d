"""Live load generation: closed and open loops with clients as threads or asyncio tasks (the
process-based clients in :mod:`.procs` run these same loops in each child process).

A :class:`Target` is what the clients call: ``call(qi)`` answers query ``qi`` (the bare library
call where the backend has one: nothing else sits between the two clock reads) and ``score(qi,
raw)`` turns the raw answer into its recall@k after the clock stopped. ``acall`` is the native
coroutine of a backend with :class:`~retrieval.indexes.base.SupportsAsyncSearch` (asyncio
clients use it; otherwise they run ``call`` in a thread pool).

Precision: every client thread sets its Linux timer slack to 1 ns (``prctl``) so ``time.sleep``
wakes within microseconds, and the interpreter's switch interval is lowered while a point runs
(``switch_interval_ms``; restored after), so a waking client gets the GIL promptly.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.bench.load.stats import ERROR, NOT_SENT, OK, TIMEOUT, Recording
from retrieval.timing import clock_ns

log = logging.getLogger(__name__)
_PR_SET_TIMERSLACK = 29
LEAD_NS = 50_000_000  # the schedule starts 50 ms after the clients are ready
SAMPLE_S = 0.002  # in-system sampling period


@dataclass(frozen=True)
class Target:
    """What the clients call (see the module docstring). ``nq``: distinct queries (request
    ``i`` asks query ``i % nq``)."""

    name: str
    nq: int
    call: Callable[[int], Any]
    score: Callable[[int, Any], float]
    acall: Callable[[int], Awaitable[Any]] | None = None


@dataclass(frozen=True)
class LoopOptions:
    """``timeout_ns``: a query answered later than this after its intended send time is a
    timeout (failed, kept in the percentiles); ``abort_errors``: this many consecutive errors
    end the point early (a server that died), marked partial."""

    warmup_ns: int
    duration_ns: int
    timeout_ns: int
    abort_errors: int = 50
    switch_interval_ms: float = 0.5


def _fine_timer() -> None:
    """Timer slack 1 ns for the calling thread (Linux), so sleeps end on time."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # not glibc: default slack
            ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)


def sleep_until(t_ns: int) -> None:
    """Sleep until clock ``t_ns`` (ns)."""
    rest = t_ns - clock_ns()
    if rest > 0:
        time.sleep(rest / 1e9)


@contextlib.contextmanager
def fine_switching(ms: float) -> Iterator[None]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(max(ms, 0.05) / 1000.0)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


class _Book:
    """Per-request arrays shared by the clients (each request index written by one client)."""

    def __init__(self, n: int) -> None:
        self.intended = np.zeros(n, np.int64)
        self.sent = np.zeros(n, np.int64)
        self.done = np.zeros(n, np.int64)
        self.status = np.full(n, NOT_SENT, np.int8)
        self.waited = np.zeros(n, bool)
        self.raw: list[Any] = [None] * n
        self.errors_in_row = 0
        self.first_error: str | None = None
        self.aborted: str | None = None
        self.abort_ns = 0
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def finish(self, i: int, ok: bool, exc: BaseException | None, timeout_ns: int,
               abort_errors: int, done_ns: int = 0) -> None:
        self.done[i] = done_ns or clock_ns()
        if ok:
            late = self.done[i] - self.intended[i] > timeout_ns
            self.status[i] = TIMEOUT if late else OK
            self.errors_in_row = 0
            return
        self.status[i] = ERROR
        with self.lock:
            if self.first_error is None:
                self.first_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.errors_in_row += 1
            if self.errors_in_row >= abort_errors and self.aborted is None:
                self.aborted = f"{self.errors_in_row} consecutive errors ({self.first_error})"
                self.abort_ns = int(self.done[i])
                self.stop.set()


def _recording(book: _Book, target: Target, start_ns: int, opt: LoopOptions,
               samples: list[int], cpu_s: float, *, closed: bool) -> Recording:
    """The requests of the measurement window, scored (recall computed outside the timer)."""
    w0 = start_ns + opt.warmup_ns
    w1 = w0 + opt.duration_ns
    if book.aborted is not None:  # partial: everything from the start to the abort is kept
        w0, w1 = start_ns, max(start_ns + 1, min(w1, book.abort_ns + 1))
    t = book.sent if closed else book.intended
    keep = (t >= w0) & (t < w1)
    if closed:
        keep &= book.status != NOT_SENT
    idx = np.flatnonzero(keep)
    deadline = w1 + opt.timeout_ns
    done = book.done[idx].copy()
    status = book.status[idx].copy()
    unsent = status == NOT_SENT
    done[unsent] = np.maximum(deadline, book.intended[idx][unsent] + opt.timeout_ns)
    sent = np.where(unsent, done, book.sent[idx])
    recall = np.full(idx.shape[0], np.nan)
    for j, i in enumerate(idx.tolist()):
        if book.status[i] in (OK, TIMEOUT) and book.raw[i] is not None:
            recall[j] = target.score(i % target.nq, book.raw[i])
    answered = int(((book.status == OK) & (book.done >= w0) & (book.done < w1)).sum())
    return Recording(book.intended[idx].copy(), sent, done, status, book.waited[idx].copy(),
                     recall, int(w1 - w0), np.asarray(samples, np.int64), cpu_s,
                     book.aborted, book.first_error, answered)


def _sampler(book: _Book, w0: int, w1: int, count: Callable[[], int],
             out: list[int]) -> threading.Thread:
    def loop() -> None:
        _fine_timer()
        while not book.stop.is_set():
            now = clock_ns()
            if now >= w1:
                return
            if now >= w0:
                out.append(count())
            time.sleep(SAMPLE_S)

    th = threading.Thread(target=loop, name="rwb-load-sampler", daemon=True)
    th.start()
    return th


def open_loop_threads(target: Target, offsets_ns: np.ndarray, clients: int,
                      opt: LoopOptions, start_ns: int | None = None) -> Recording:
    """Open loop: requests at ``start + offsets_ns`` (warm-up included), served by ``clients``
    threads that each take the next request, wait for its intended time if early, and send."""
    n = int(offsets_ns.shape[0])
    book = _Book(n)
    counter = itertools.count()
    done_count = [0] * clients
    ready = threading.Barrier(clients + 1)
    start = [0]

    def client(c: int) -> None:
        _fine_timer()
        ready.wait()
        s0 = start[0]
        call = target.call
        nq = target.nq
        while not book.stop.is_set():
            i = next(counter)
            if i >= n:
                return
            t_int = s0 + int(offsets_ns[i])
            now = clock_ns()
            if now < t_int:
                book.waited[i] = True
                sleep_until(t_int)
            elif now - t_int > opt.timeout_ns:  # past its deadline before a client was free
                book.sent[i] = book.done[i] = now
                book.status[i] = TIMEOUT
                done_count[c] += 1
                continue
            book.sent[i] = clock_ns()
            try:
                book.raw[i] = call(i % nq)
                book.finish(i, True, None, opt.timeout_ns, opt.abort_errors)
            except Exception as exc:  # a failed query is counted, never raised
                book.finish(i, False, exc, opt.timeout_ns, opt.abort_errors)
            done_count[c] += 1

    threads = [threading.Thread(target=client, args=(c,), name=f"rwb-load-{c}", daemon=True)
               for c in range(clients)]
    with fine_switching(opt.switch_interval_ms):
        for th in threads:
            th.start()
        start[0] = start_ns or clock_ns() + LEAD_NS
        abs_t = start[0] + offsets_ns
        book.intended[:] = abs_t
        w0 = start[0] + opt.warmup_ns
        samples: list[int] = []

        def in_system() -> int:
            return int(np.searchsorted(abs_t, clock_ns(), side="right")) - sum(done_count)

        sampler = _sampler(book, w0, w0 + opt.duration_ns, in_system, samples)
        ready.wait()
        cpu0, t0 = time.process_time(), clock_ns()
        _join(threads, book, start[0] + int(offsets_ns[-1]) + opt.timeout_ns)
        cpu_s = (time.process_time() - cpu0) * opt.duration_ns / max(clock_ns() - t0, 1)
        sampler.join(timeout=1.0)
    return _recording(book, target, start[0], opt, samples, cpu_s, closed=False)


def _join(threads: list[threading.Thread], book: _Book, deadline_ns: int) -> None:
    """Wait for the clients until ``deadline_ns`` (plus 1 s of grace); a client stuck in a call
    past it is left behind (daemon thread) and its request counts as a timeout."""
    for th in threads:
        th.join(timeout=max(0.0, (deadline_ns - clock_ns()) / 1e9) + 1.0)
    if any(th.is_alive() for th in threads):
        log.warning("load: %d client(s) still inside a call after the deadline; their "
                    "requests count as timeouts", sum(th.is_alive() for th in threads))
        book.stop.set()


def closed_loop_threads(target: Target, clients: int, opt: LoopOptions,
                        start_ns: int | None = None) -> Recording:
    """Closed loop: ``clients`` threads, each sending its next request when the last returns,
    for warm-up + duration (requests sent in the window are measured)."""
    cap = 1 << 16
    books = [_Book(cap) for _ in range(clients)]
    busy = [0] * clients
    ready = threading.Barrier(clients + 1)
    start = [0]
    stop = threading.Event()

    def client(c: int) -> None:
        _fine_timer()
        b = books[c]
        ready.wait()
        sleep_until(start[0])  # every client starts at the common start time
        end = start[0] + opt.warmup_ns + opt.duration_ns
        call, nq = target.call, target.nq
        for i in itertools.count(c, clients):
            j = i // clients
            if j >= b.intended.shape[0]:
                _grow(b)
            now = clock_ns()
            if now >= end or stop.is_set():
                return
            b.intended[j] = b.sent[j] = now
            busy[c] = 1
            try:
                b.raw[j] = call(i % nq)
                b.finish(j, True, None, opt.timeout_ns, opt.abort_errors)
            except Exception as exc:
                b.finish(j, False, exc, opt.timeout_ns, opt.abort_errors)
                if b.aborted:
                    stop.set()
            busy[c] = 0

    threads = [threading.Thread(target=client, args=(c,), name=f"rwb-load-{c}", daemon=True)
               for c in range(clients)]
    with fine_switching(opt.switch_interval_ms):
        for th in threads:
            th.start()
        start[0] = start_ns or clock_ns() + LEAD_NS
        w0 = start[0] + opt.warmup_ns
        samples: list[int] = []
        guard = _Book(0)
        sampler = _sampler(guard, w0, w0 + opt.duration_ns, lambda: sum(busy), samples)
        ready.wait()
        cpu0, t0 = time.process_time(), clock_ns()
        _join(threads, guard, w0 + opt.duration_ns + opt.timeout_ns)
        cpu_s = (time.process_time() - cpu0) * opt.duration_ns / max(clock_ns() - t0, 1)
        sampler.join(timeout=1.0)
    return _merge_closed(books, target, start[0], opt, samples, cpu_s, clients)


def _grow(b: _Book) -> None:
    n = b.intended.shape[0]
    for name in ("intended", "sent", "done"):
        setattr(b, name, np.concatenate([getattr(b, name), np.zeros(n, np.int64)]))
    b.status = np.concatenate([b.status, np.full(n, NOT_SENT, np.int8)])
    b.waited = np.concatenate([b.waited, np.zeros(n, bool)])
    b.raw.extend([None] * n)


def _merge_closed(books: list[_Book], target: Target, start_ns: int, opt: LoopOptions,
                  samples: list[int], cpu_s: float, clients: int) -> Recording:
    """One book from the clients' books (request i of client c is global ``j*clients + c``)."""
    n = max(b.intended.shape[0] for b in books) * clients
    book = _Book(n)
    for c, b in enumerate(books):
        m = b.intended.shape[0]
        sl = slice(c, c + m * clients, clients)
        book.intended[sl], book.sent[sl], book.done[sl] = b.intended, b.sent, b.done
        book.status[sl] = b.status
        for j in range(m):
            book.raw[c + j * clients] = b.raw[j]
        if b.aborted and book.aborted is None:
            book.aborted, book.abort_ns = b.aborted, b.abort_ns
        book.first_error = book.first_error or b.first_error
    return _recording(book, target, start_ns, opt, samples, cpu_s, closed=True)


# --------------------------------------------------------------------------- asyncio


def open_loop_asyncio(target: Target, offsets_ns: np.ndarray, clients: int,
                      opt: LoopOptions) -> Recording:
    """Open loop on one event loop: a dispatcher starts each request at its intended time as a
    task (at most ``clients`` in flight); a request awaits the backend's native coroutine, or
    runs ``call`` in a pool of ``clients`` threads."""
    return asyncio.run(_open_async(target, offsets_ns, clients, opt))


def _timed_call(call: Callable[[int], Any], qi: int) -> tuple[Any, int, int]:
    """``call(qi)`` timed inside the pool thread (the event loop may notice it later)."""
    t0 = clock_ns()
    raw = call(qi)
    return raw, t0, clock_ns()


async def _open_async(target: Target, offsets_ns: np.ndarray, clients: int,
                      opt: LoopOptions) -> Recording:
    from concurrent.futures import ThreadPoolExecutor

    n = int(offsets_ns.shape[0])
    book = _Book(n)
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=clients, thread_name_prefix="rwb-load-aio",
                              initializer=_fine_timer)
    slots = asyncio.Semaphore(clients)
    done_count = [0]
    acall = target.acall

    async def one(i: int) -> None:
        async with slots:
            if clock_ns() - book.intended[i] > opt.timeout_ns:
                book.sent[i] = book.done[i] = clock_ns()
                book.status[i] = TIMEOUT
                done_count[0] += 1
                return
            book.sent[i] = clock_ns()
            try:
                t_done = 0
                if acall is not None:
                    book.raw[i] = await acall(i % target.nq)
                else:
                    book.raw[i], book.sent[i], t_done = await loop.run_in_executor(
                        pool, _timed_call, target.call, i % target.nq)
                book.finish(i, True, None, opt.timeout_ns, opt.abort_errors, t_done)
            except Exception as exc:
                book.finish(i, False, exc, opt.timeout_ns, opt.abort_errors)
            done_count[0] += 1

    _fine_timer()
    start = clock_ns() + LEAD_NS
    abs_t = start + offsets_ns
    book.intended[:] = abs_t
    w0 = start + opt.warmup_ns
    samples: list[int] = []
    sampler = _sampler(book, w0, w0 + opt.duration_ns,
                       lambda: int(np.searchsorted(abs_t, clock_ns(), side="right"))
                       - done_count[0], samples)
    tasks = []
    cpu0, t0 = time.process_time(), clock_ns()
    with fine_switching(opt.switch_interval_ms):
        for i in range(n):
            if book.stop.is_set():
                break
            t_int = int(abs_t[i])
            rest = t_int - clock_ns()
            if rest > 0:
                await asyncio.sleep(rest / 1e9)
                book.waited[i] = not slots.locked()
            tasks.append(asyncio.ensure_future(one(i)))
        limit = max(0.0, (int(abs_t[-1]) + opt.timeout_ns - clock_ns()) / 1e9) + 1.0
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=limit)
            for t in pending:
                t.cancel()
    cpu_s = (time.process_time() - cpu0) * opt.duration_ns / max(clock_ns() - t0, 1)
    book.stop.set()
    sampler.join(timeout=1.0)
    pool.shutdown(wait=False, cancel_futures=True)
    return _recording(book, target, start, opt, samples, cpu_s, closed=False)


def closed_loop_asyncio(target: Target, clients: int, opt: LoopOptions) -> Recording:
    """Closed loop with ``clients`` asyncio tasks (native coroutine or a thread pool)."""
    return asyncio.run(_closed_async(target, clients, opt))


async def _closed_async(target: Target, clients: int, opt: LoopOptions) -> Recording:
    from concurrent.futures import ThreadPoolExecutor

    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=clients, thread_name_prefix="rwb-load-aio")
    books = [_Book(1 << 14) for _ in range(clients)]
    busy = [0] * clients
    start = clock_ns() + LEAD_NS
    end = start + opt.warmup_ns + opt.duration_ns
    stop = threading.Event()

    async def client(c: int) -> None:
        b = books[c]
        await asyncio.sleep(max(0, start - clock_ns()) / 1e9)
        for i in itertools.count(c, clients):
            j = i // clients
            if j >= b.intended.shape[0]:
                _grow(b)
            now = clock_ns()
            if now >= end or stop.is_set():
                return
            b.intended[j] = b.sent[j] = now
            busy[c] = 1
            try:
                if target.acall is not None:
                    b.raw[j] = await target.acall(i % target.nq)
                else:
                    b.raw[j] = await loop.run_in_executor(pool, target.call, i % target.nq)
                b.finish(j, True, None, opt.timeout_ns, opt.abort_errors)
            except Exception as exc:
                b.finish(j, False, exc, opt.timeout_ns, opt.abort_errors)
                if b.aborted:
                    stop.set()
            busy[c] = 0

    w0 = start + opt.warmup_ns
    samples: list[int] = []
    guard = _Book(0)
    sampler = _sampler(guard, w0, w0 + opt.duration_ns, lambda: sum(busy), samples)
    cpu0, t0 = time.process_time(), clock_ns()
    with fine_switching(opt.switch_interval_ms):
        await asyncio.gather(*(client(c) for c in range(clients)))
    cpu_s = (time.process_time() - cpu0) * opt.duration_ns / max(clock_ns() - t0, 1)
    guard.stop.set()
    sampler.join(timeout=1.0)
    pool.shutdown(wait=False, cancel_futures=True)
    return _merge_closed(books, target, start, opt, samples, cpu_s, clients)


__all__ = [
    "LoopOptions",
    "Target",
    "closed_loop_asyncio",
    "closed_loop_threads",
    "open_loop_asyncio",
    "open_loop_threads",
    "sleep_until",
]
