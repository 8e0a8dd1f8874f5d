"""Time per phase of a run (fingerprint, ground truth, builds, searches) and the resident peak.

A process-wide recorder: library code wraps a long phase in ``with phase("ground_truth"):``;
the run directory writes :func:`snapshot` into its manifest when the run ends. Seconds are wall
time (``time.perf_counter``); the resident peak is the process's maximum resident set size
(``getrusage``, bytes) since it started.

Progress of long phases (out-of-core ground truth, fingerprinting a large file, a scale study's
sample sizes): library code calls :func:`report`; whoever runs it (the CLI for every command,
or an API user) installs a callback with :func:`progress_to`. Library code never prints.
"""

from __future__ import annotations

import contextlib
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

#: the phases rwb records (others may be added by name)
PHASES = ("fingerprint", "ground_truth", "build", "search")

_lock = threading.Lock()
_seconds: dict[str, float] = {}
_counts: dict[str, int] = {}


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the wall time of the block to phase ``name`` (nested blocks of one phase count
    once: only the outermost is timed)."""
    local = _active()
    if name in local:
        yield
        return
    local.add(name)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        local.discard(name)
        with _lock:
            _seconds[name] = _seconds.get(name, 0.0) + dt
            _counts[name] = _counts.get(name, 0) + 1


_tls = threading.local()


def _active() -> set[str]:
    got: set[str] | None = getattr(_tls, "active", None)
    if got is None:
        got = _tls.active = set()
    return got


def resident_peak_bytes() -> int:
    """The process's peak resident set size in bytes (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def snapshot() -> dict[str, Any]:
    """``{"phases": {name: {"s": seconds, "count": n}}, "resident_peak_bytes": int}``."""
    with _lock:
        phases = {k: {"s": round(v, 3), "count": _counts.get(k, 0)}
                  for k, v in sorted(_seconds.items())}
    return {"phases": phases, "resident_peak_bytes": resident_peak_bytes()}


#: a phase progress callback: (phase, done, total, description); total 0 when unknown
PhaseProgress = Callable[[str, int, int, str], None]

_reporter: list[PhaseProgress | None] = [None]


@contextlib.contextmanager
def progress_to(callback: PhaseProgress | None) -> Iterator[None]:
    """Send :func:`report` calls of the whole process (all threads) to ``callback`` within
    the block (the previous callback is restored after it)."""
    with _lock:
        previous = _reporter[0]
        _reporter[0] = callback
    try:
        yield
    finally:
        with _lock:
            _reporter[0] = previous


def report(name: str, done: int, total: int, what: str = "") -> None:
    """Progress of a long phase: ``done`` of ``total`` units (rows, samples; ``total`` 0 when
    unknown). A no-op when no callback is installed (:func:`progress_to`)."""
    callback = _reporter[0]
    if callback is not None:
        callback(name, int(done), int(total), what)


def reset() -> None:
    """Forget the recorded phases (a new run in the same process)."""
    with _lock:
        _seconds.clear()
        _counts.clear()
