"""The page cache and the latency profile of a cold run (issue 31, item 3), shared by the cold
run of file-backed indexes (:mod:`retrieval.tune.cold`), its cgroup child
(:mod:`retrieval.tune.cold_child`) and the cold run of server indexes
(:mod:`retrieval.tune.cold_server`). Latencies in ms; definitions in :mod:`retrieval.tune.cold`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import NotReachable

COLD_WINDOW = 32
WARM_FACTOR = 1.2
WARM_PASSES = 2
BUDGETS = (0.25, 0.5, 1.0)
CURVE_POINTS = 200
SHARED_BUFFERS = ("shared_buffers: the server (rwb's own) restarted with shared_buffers at the "
                  "budget's bytes (at least 128 kB) and the table's files dropped from the OS "
                  f"page cache before each window of {COLD_WINDOW} queries (posix_fadvise "
                  "DONTNEED); not a cgroup limit on the page cache")


# --- the page cache --------------------------------------------------------------------------
def _flush(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_pages(files: Sequence[Path], *, keep_fraction: float = 0.0) -> str:
    """Drop the page-cache pages of ``files`` (beyond ``keep_fraction`` of each file's bytes);
    returns the method used. NotReachable when no method works here."""
    if hasattr(os, "posix_fadvise"):
        for f in files:
            _flush(f)
            size = f.stat().st_size
            start = int(size * keep_fraction) // mmap.PAGESIZE * mmap.PAGESIZE
            fd = os.open(f, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, start, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return "posix_fadvise(POSIX_FADV_DONTNEED)"
    drop = Path("/proc/sys/vm/drop_caches")
    if keep_fraction == 0.0 and os.access(drop, os.W_OK):
        os.sync()
        drop.write_text("1\n")
        return "/proc/sys/vm/drop_caches"
    raise NotReachable("cold run: page-cache pages cannot be dropped here (no posix_fadvise, "
                       "/proc/sys/vm/drop_caches not writable): not measurable here")


def resident_fraction(files: Sequence[Path]) -> float | None:
    """The share of the files' pages in the page cache (``mincore`` on a fresh read-only
    mapping), None where it cannot be read."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    total = resident = 0
    for f in files:
        size = f.stat().st_size
        if size == 0:
            continue
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * pages)()
        fd = os.open(f, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr is None or addr == ctypes.c_void_p(-1).value:
                return None
            try:
                if libc.mincore(addr, size, vec) != 0:
                    return None
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)
        total += pages
        resident += int(np.count_nonzero(np.frombuffer(bytes(vec), dtype=np.uint8) & 1))
    return resident / total if total else None


def file_bytes(files: Sequence[Path]) -> int:
    """Bytes the files hold on disk: per file the smaller of its size and its allocated blocks
    (a sparse, preallocated file, as Qdrant's, counts what was written); the RAM budgets are
    shares of it."""
    return int(sum(min(st.st_size, st.st_blocks * 512) for st in (f.stat() for f in files)))


# --- the latency profile ---------------------------------------------------------------------
def queries_to_warm(lat_ms: np.ndarray, warm_p99: float, window: int = COLD_WINDOW,
                    factor: float = WARM_FACTOR) -> int | None:
    """Queries searched before the first window of ``window`` consecutive queries whose p99 is
    within ``factor`` x ``warm_p99`` (None: no such window)."""
    for i in range(0, max(lat_ms.size - window + 1, 0)):
        if float(np.percentile(lat_ms[i:i + window], 99)) <= factor * warm_p99:
            return i
    return None


def p99_curve(lat_ms: np.ndarray, window: int = COLD_WINDOW, points: int = CURVE_POINTS
              ) -> list[list[float]]:
    """The rolling p99 (ms) over ``window`` consecutive queries, as ``[queries searched
    before the window, p99]`` pairs (at most ``points`` windows, evenly spaced)."""
    starts = range(0, max(lat_ms.size - window + 1, 0))
    step = max(1, len(starts) // points)
    return [[int(i), float(np.percentile(lat_ms[i:i + window], 99))] for i in starts[::step]]


def cold_profile(cold: np.ndarray, warm: np.ndarray, window: int = COLD_WINDOW) -> dict[str, Any]:
    """``cold_p99_ms``, ``warm_p99_ms``, ``queries_to_warm`` of a cold pass followed by warm
    passes (``cold``: every query after the drop, in order; ``warm``: the last pass)."""
    warm_p99 = float(np.percentile(warm, 99))
    seq = np.concatenate([cold, warm])
    return {
        "p99_curve": p99_curve(seq, window),
        "cold_p99_ms": float(np.percentile(cold[:window], 99)),
        "warm_p99_ms": warm_p99,
        "queries_to_warm": queries_to_warm(seq, warm_p99, window),
        "first_query_ms": float(cold[0]),
        "cold_max_first_ms": float(cold[: min(8, cold.size)].max()),
        "warm_p50_ms": float(np.percentile(warm, 50)),
        "window": window,
    }


def timed_pass(index: Any, queries: np.ndarray, k: int,
               before: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Single-query latencies (ms) and ids of one pass; ``before(j)`` runs untimed first."""
    lat = np.empty(len(queries), dtype=np.float64)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    for j, q in enumerate(queries):
        if before is not None:
            before(j)
        x = np.ascontiguousarray(q[None, :])
        t0 = time.perf_counter_ns()
        res = index.search(x, k)
        lat[j] = (time.perf_counter_ns() - t0) / 1e6
        got = np.asarray(res.ids[0], dtype=np.int64)
        ids[j, : got.size] = got
    return lat, ids


__all__ = ["BUDGETS", "COLD_WINDOW", "CURVE_POINTS", "SHARED_BUFFERS", "WARM_FACTOR",
           "WARM_PASSES", "cold_profile", "drop_pages", "file_bytes", "p99_curve",
           "queries_to_warm", "resident_fraction", "timed_pass"]
