"""Memory measured, not estimated: the resident bytes a built index holds, its on-disk bytes,
bytes per vector and the ratio to float32, and the memory doctor's flags.

Where the figure comes from (``MemoryReport.resident_source`` says which):

- an in-process backend with a snapshot format (Faiss, hnswlib): the snapshot is written to a
  temporary folder (its size = ``disk_bytes``) and read back by ``load_snapshot`` in a clean
  subprocess, twice; ``resident_bytes`` is that process's RSS growth (psutil, after
  ``malloc_trim``) across the second load (the first pays the library's one-time allocations,
  about 1 MB for Faiss, which would otherwise dominate a small index);
- an in-process backend without one (Qdrant's engine in process): a clean subprocess builds a
  small warm-up index, then the index from the vectors (memory-mapped, so they leave its RSS
  when dropped); the RSS growth across that build + drop of the input is the figure;
- a server (PostgreSQL, Redis, Milvus): the engine's own figures (``SupportsMemoryFacts``), else
  the backend's ``memory_bytes()`` as it documents it.

The doctor flags an encoding that does not shrink what it claims to (``SupportsMemoryClaim``):
measured bytes per vector above ``CLAIM_SLACK`` x the claim + ``CLAIM_OVERHEAD_B`` bytes.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import logging
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import BackendError
from retrieval.indexes.base import (
    IndexBackend,
    MemoryClaim,
    SupportsMemoryClaim,
    SupportsMemoryFacts,
    SupportsMemoryReport,
    SupportsServerAttach,
    SupportsSnapshot,
)

log = logging.getLogger(__name__)

#: the doctor's tolerance: measured bytes/vector above CLAIM_SLACK * claim + CLAIM_OVERHEAD_B
#: means the encoding does not hold what it claims (allocator rounding, list capacity and
#: per-list headers stay well inside it)
CLAIM_SLACK = 1.5
CLAIM_OVERHEAD_B = 64.0
#: bytes a resident measurement holds whatever the size (allocator arenas, page rounding, the
#: library's own tables): spread over the n vectors, never charged to each one (at 4k-20k
#: vectors it made plain float32 hnswlib look "not shrinking")
CLAIM_FIXED_B = 4.0 * 2**20
#: rows of the warm-up build before a measured build (its one-time allocations are not counted)
WARM_ROWS = 2048
#: how long a measuring subprocess may take (s)
CHILD_TIMEOUT_S = 900.0
SOURCE_LOAD = ("rss delta across load_snapshot in a clean subprocess, after a warm-up load "
               "(psutil, after malloc_trim)")
SOURCE_BUILD = ("rss delta across build (input memory-mapped, then dropped) in a clean "
                "subprocess, after a small warm-up build (psutil, after malloc_trim)")


@dataclass(frozen=True)
class MemoryReport:
    """Memory of one built index (bytes). ``resident_bytes``: what it holds in RAM, measured
    (see the module doc; ``resident_source`` names the figure); ``disk_bytes``: its files
    (None when it has none here); ``claimed_bytes_per_vector`` / ``encoding`` / ``refine_store``:
    from :class:`~retrieval.indexes.base.MemoryClaim` when the backend states one; ``flags``:
    the doctor's findings (empty when none)."""

    n: int
    dim: int
    resident_bytes: int | None
    resident_source: str
    disk_bytes: int | None = None
    claimed_bytes_per_vector: float | None = None
    encoding: str | None = None
    refine_store: str | None = None
    flags: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bytes_per_vector(self) -> float | None:
        if self.resident_bytes is None or self.n <= 0:
            return None
        return self.resident_bytes / self.n

    @property
    def ratio_to_float32(self) -> float | None:
        """Measured bytes per vector / the float32 vector alone (4 * dim)."""
        bpv = self.bytes_per_vector
        return None if bpv is None else bpv / (4.0 * self.dim)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["flags"] = list(self.flags)
        d["bytes_per_vector"] = self.bytes_per_vector
        d["ratio_to_float32"] = self.ratio_to_float32
        return d


def doctor(n: int, dim: int, resident: int | None, claim: MemoryClaim | None) -> tuple[str, ...]:
    """The doctor's flags for a measured index: ``does_not_shrink`` when the measured bytes per
    vector exceed ``CLAIM_SLACK * claim + CLAIM_OVERHEAD_B + CLAIM_FIXED_B / n`` (an encoding
    that claims a size it does not hold; the fixed overhead is spread over the vectors),
    ``unmeasured`` when there is no resident figure."""
    if resident is None or n <= 0:
        return ("unmeasured",)
    if claim is None:
        return ()
    bpv = resident / n
    limit = CLAIM_SLACK * claim.bytes_per_vector + CLAIM_OVERHEAD_B + CLAIM_FIXED_B / n
    if bpv > limit:
        return (f"does_not_shrink: {claim.encoding} claims {claim.bytes_per_vector:.0f} "
                f"bytes/vector, {bpv:.0f} measured ({bpv / (4.0 * dim):.2f}x float32; "
                f"tolerance {CLAIM_SLACK}x + {CLAIM_OVERHEAD_B:.0f} B + "
                f"{CLAIM_FIXED_B / 2**20:.0f} MiB over the whole index)",)
    return ()


def dir_bytes(folder: Path) -> int:
    """Bytes of the regular files under ``folder``."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def measure(
    index: IndexBackend,
    n: int,
    vectors: np.ndarray | None = None,
    *,
    resident: bool = True,
    timeout_s: float = CHILD_TIMEOUT_S,
) -> MemoryReport:
    """The memory of the built ``index`` holding ``n`` vectors (see the module doc).

    ``vectors``: the build input, needed only for an in-process backend without a snapshot
    format (rebuilt in a subprocess with the same params and seed). ``resident=False`` skips
    the subprocess and reports the backend's own ``memory_bytes()``."""
    claim = index.memory_claim() if isinstance(index, SupportsMemoryClaim) else None
    extra: dict[str, Any] = {}
    disk: int | None = None
    rss: int | None = None
    if isinstance(index, SupportsMemoryFacts):
        facts = dict(index.memory_facts())
        rss, source = facts.pop("resident_bytes", None), str(facts.pop("source", "engine"))
        disk = facts.pop("disk_bytes", None)
        extra = facts
    elif resident and isinstance(index, SupportsSnapshot):
        with tempfile.TemporaryDirectory(prefix="rwb-mem-") as tmp:
            folder = Path(tmp) / "snap"
            folder.mkdir()
            index.save_snapshot(folder)
            disk = dir_bytes(folder)
            rss = _child(index, {"mode": "load", "folder": str(folder), "n": n}, timeout_s)
        source = SOURCE_LOAD
    elif resident and vectors is not None and not isinstance(index, SupportsServerAttach):
        with tempfile.TemporaryDirectory(prefix="rwb-mem-") as tmp:
            path = Path(tmp) / "x.npy"
            np.save(path, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
            rss = _child(index, {"mode": "build", "vectors": str(path), "n": n}, timeout_s)
        source = SOURCE_BUILD
    elif isinstance(index, SupportsMemoryReport):
        rss, source = int(index.memory_bytes()), f"{index.name}.memory_bytes() (backend's own)"
    else:
        source = "none"
    if disk is None and isinstance(index, SupportsMemoryReport) and source != "none":
        extra.setdefault("reported_bytes", int(index.memory_bytes()))
    return MemoryReport(
        n=n, dim=index.dim, resident_bytes=None if rss is None else int(rss),
        resident_source=source, disk_bytes=disk,
        claimed_bytes_per_vector=None if claim is None else claim.bytes_per_vector,
        encoding=None if claim is None else claim.encoding,
        refine_store=None if claim is None else claim.refine_store,
        flags=doctor(n, index.dim, rss, claim), extra=extra,
    )


def _child(index: IndexBackend, job: dict[str, Any], timeout_s: float) -> int:
    """Run :func:`_child_main` in a fresh interpreter; its RSS delta in bytes."""
    job = {**job, "backend": index.name, "dim": index.dim, "metric": index.metric,
           "seed": index.seed,
           "build": index.build_params.model_dump(mode="json", exclude_unset=True)}
    with tempfile.TemporaryDirectory(prefix="rwb-mem-job-") as tmp:
        jpath, opath = Path(tmp) / "job.json", Path(tmp) / "out.json"
        jpath.write_text(json.dumps(job))
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        proc = subprocess.run([sys.executable, "-m", "retrieval.memory", str(jpath), str(opath)],
                              capture_output=True, text=True, timeout=timeout_s, env=env,
                              check=False)
        if proc.returncode != 0 or not opath.is_file():
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
            raise BackendError(f"memory measurement of '{index.name}' failed in its "
                               f"subprocess (exit {proc.returncode}): {tail[0]}")
        return int(json.loads(opath.read_text())["rss_delta_bytes"])


def _rss() -> int:
    import psutil

    gc.collect()
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError):  # not glibc: no trim
            ctypes.CDLL("libc.so.6").malloc_trim(0)
    return int(psutil.Process(os.getpid()).memory_info().rss)


def _child_main(job_path: str, out_path: str) -> None:
    """The measuring subprocess: construct the backend, take RSS, load or build, take RSS."""
    from retrieval.indexes.registry import get_backend
    from retrieval.params import validate_params

    job = json.loads(Path(job_path).read_text())
    cls = get_backend(job["backend"])
    build = validate_params(cls.BuildParams, job["build"])
    index: Any = cls(int(job["dim"]), job["metric"], build, seed=int(job["seed"]))
    for module in cls.requires:  # the library's own import is not the index's memory
        importlib.import_module(module)
    warm: Any = cls(int(job["dim"]), job["metric"], build, seed=int(job["seed"]))
    if job["mode"] == "load":
        # a first load warms the library's one-time allocations (I/O buffers, SWIG tables);
        # the figure is the growth across a second one (the first stays alive meanwhile)
        warm.load_snapshot(Path(job["folder"]), int(job["n"]))
        before = _rss()
        index.load_snapshot(Path(job["folder"]), int(job["n"]))
    else:
        x = np.load(job["vectors"], mmap_mode="r", allow_pickle=False)
        warm.build(np.array(x[: min(len(x), WARM_ROWS)]))  # one-time allocations, not measured
        before = _rss()
        index.build(x)
        del x
    after = _rss()
    Path(out_path).write_text(json.dumps({"rss_delta_bytes": max(0, after - before)}))
    index.close()
    warm.close()


if __name__ == "__main__":  # the measuring subprocess (see _child)
    _child_main(sys.argv[1], sys.argv[2])
