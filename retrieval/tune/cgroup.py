"""cgroup memory limits for the RAM budgets of a cold run (issue 31, item 3).

A budget is served by a CHILD process (:mod:`retrieval.tune.cold_child`) placed in a memory
cgroup of rwb's own, a child of the group rwb itself runs in (so every limit above rwb still
applies): cgroup v2 ``memory.max`` (the unified hierarchy, ``/sys/fs/cgroup/cgroup.controllers``
present, ``memory`` delegated to the subtree) or cgroup v1 ``memory.limit_in_bytes`` (the
``memory`` controller's hierarchy, ``/sys/fs/cgroup/memory``). The page-cache pages of the index
files that child reads are charged to its group and reclaimed beyond the limit.

rwb names its group ``rwb-cold-<pid>-<hex>`` (the pid of the rwb process that made it), removes
that group and only that group when the measurement ends (also on an exception), and never
touches a group it did not create. A group left by a killed rwb (its pid gone) is listed by
:func:`leftover_groups` (``rmdir`` removes one; ``find /sys/fs/cgroup -name 'rwb-cold-*'``
finds them).

:func:`serve_in_group` serves one budget: it writes the job (backend, build params, the saved
index's folder, the search params, the queries) into a folder of rwb's, makes the group and
starts :mod:`retrieval.tune.cold_child` already inside it (a shell writes its own pid into the
group's ``cgroup.procs`` and execs Python, so everything the child allocates or reads is charged
there). When the child is ready, the limit is set to the group's charged bytes at that point
(the child's own resident memory: everything but the index pages) + budget x the index files'
bytes + ``HEADROOM_BYTES`` (the search's own allocations). Index pages beyond the limit are
reclaimed by the kernel and read again: that is the budget's cost. An OOM kill of the child is
reported as ``budget too small for this engine to serve``, not as a failure of the run.

:func:`memory_cgroup` says which hierarchy this machine has and whether rwb can create a group
with a limit there; where it cannot, the budgets fall back to the ``fadvise-window``
approximation (:mod:`retrieval.tune.cold`) and the summary says why.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import BackendError

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
HEADROOM_BYTES = 4 << 20
READY_TIMEOUT_S = 300.0
RUN_TIMEOUT_S = 3600.0
TOO_SMALL = "budget too small for this engine to serve"
NOT_MOVED = 97  # the child's exit status when its shell could not join the group

PREFIX = "rwb-cold-"

def _own_group(version: int, proc: Path) -> str | None:
    """The path of this process's group in the hierarchy (``/`` for the root), from
    /proc/self/cgroup."""
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if version == 2 and parts[0] == "0" and parts[1] == "":
            return parts[2]
        if version == 1 and "memory" in parts[1].split(","):
            return parts[2]
    return None


def memory_cgroup(root: Path = ROOT, proc: Path = Path("/proc/self/cgroup")) -> dict[str, Any]:
    """What this machine offers: ``version`` (2, 1 or None), ``limit_file`` (the limit's file
    name), ``path`` (the hierarchy), ``parent`` (the group rwb's groups are made in: the one
    this process runs in), ``writable`` (a child group could be made there), ``usable`` (a
    group with a memory limit: v2 also needs ``memory`` in the parent's
    ``cgroup.subtree_control``) and ``why`` (why not usable, or what is used)."""
    version: int | None
    limit: str | None
    if (root / "cgroup.controllers").is_file():
        version, path, limit = 2, root, "memory.max"
        if "memory" not in (root / "cgroup.controllers").read_text().split():
            version = None
    elif (root / "memory" / "memory.limit_in_bytes").is_file():
        version, path, limit = 1, root / "memory", "memory.limit_in_bytes"
    else:
        version, path, limit = None, root, None
    if version is None:
        return {"version": None, "limit_file": None, "path": None, "parent": None,
                "writable": False, "usable": False,
                "why": "no cgroup memory controller found; the budgets use fadvise-window"}
    own = _own_group(version, proc)
    parent = path / own.lstrip("/") if own is not None else path
    writable = parent.is_dir() and os.access(parent, os.W_OK)
    why = f"cgroup-v{version}: a child group of {parent} with {limit}"
    usable = writable
    if not writable:
        why = (f"cgroup v{version} found but {parent} is not writable by this user (root or a "
               f"delegated group is needed); the budgets use fadvise-window")
    elif version == 2:
        ctl = parent / "cgroup.subtree_control"
        if "memory" not in (ctl.read_text().split() if ctl.is_file() else []):
            usable = False
            why = (f"cgroup v2: 'memory' is not in {ctl} (the memory controller is not delegated "
                   f"to rwb's group); the budgets use fadvise-window")
    return {"version": version, "limit_file": limit, "path": str(path), "parent": str(parent),
            "writable": bool(writable), "usable": bool(usable), "why": why}


def _int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return None if text in ("", "max") else int(text.split()[0])


def _keyed(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except OSError:
        return None
    return None


@dataclass
class MemoryGroup:
    """A memory cgroup rwb created (``path``), removed again by :meth:`remove`."""

    path: Path
    version: int

    @classmethod
    def create(cls, info: dict[str, Any]) -> MemoryGroup:
        """Make a uniquely named group in ``info['parent']`` (:func:`memory_cgroup`); OSError
        when the kernel refuses."""
        path = Path(info["parent"]) / f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        path.mkdir()  # exclusive: never an existing group
        group = cls(path, int(info["version"]))
        if not (path / group.limit_file).is_file():
            group.remove()
            raise OSError(f"{path}: no {group.limit_file} in the new group")
        return group

    @property
    def limit_file(self) -> str:
        return "memory.max" if self.version == 2 else "memory.limit_in_bytes"

    @property
    def procs(self) -> Path:
        """The file a pid is written to, to move that process into the group."""
        return self.path / "cgroup.procs"

    def usage(self) -> int:
        """Bytes charged to the group now (anonymous memory and page cache)."""
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        return _int(self.path / name) or 0

    def set_limit(self, limit_bytes: int) -> None:
        (self.path / self.limit_file).write_text(f"{int(limit_bytes)}\n")

    def stats(self) -> dict[str, Any]:
        """``limit_failures`` (v1 ``memory.failcnt``, v2 ``memory.events`` max), ``oom_kills``,
        ``peak_bytes``, and the group's page faults where the kernel counts them."""
        if self.version == 2:
            events = self.path / "memory.events"
            return {"limit_failures": _keyed(events, "max"),
                    "oom_kills": _keyed(events, "oom_kill"),
                    "peak_bytes": _int(self.path / "memory.peak"),
                    "major_faults": _keyed(self.path / "memory.stat", "pgmajfault")}
        return {"limit_failures": _int(self.path / "memory.failcnt"),
                "oom_kills": _keyed(self.path / "memory.oom_control", "oom_kill"),
                "peak_bytes": _int(self.path / "memory.max_usage_in_bytes"),
                "major_faults": _keyed(self.path / "memory.stat", "total_pgmajfault")}

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove this group (rwb's own; its processes must have exited: retried for
        ``wait_s`` seconds, then left with a warning naming it)."""
        end = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if time.monotonic() > end:
                    log.warning("could not remove rwb's cgroup %s (%s); remove it with rmdir",
                                self.path, exc)
                    return
                time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftover_groups(info: dict[str, Any] | None = None) -> list[Path]:
    """rwb's cold-run groups in this process's parent group whose rwb process is gone (left by
    a killed run). Nothing else is listed."""
    info = info or memory_cgroup()
    if not info.get("parent"):
        return []
    out = []
    for p in sorted(Path(info["parent"]).glob(f"{PREFIX}*")):
        pid = p.name[len(PREFIX):].split("-", 1)[0]
        if p.is_dir() and pid.isdigit() and not _alive(int(pid)):
            out.append(p)
    return out


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path, timeout_s: float) -> dict[str, Any]:
    end = time.monotonic() + timeout_s
    while not ready.is_file():
        if proc.poll() is not None:
            if proc.returncode == NOT_MOVED:  # the kernel refused the move: no cgroup here
                raise OSError("the kernel refused to move the child into rwb's memory group")
            raise BackendError(f"cold run: the child exited with {proc.returncode} before it "
                               f"was ready (its stderr above says why)")
        if time.monotonic() > end:
            raise BackendError(f"cold run: the child was not ready within {timeout_s:.0f} s")
        time.sleep(0.01)
    out: dict[str, Any] = json.loads(ready.read_text())
    return out


def serve_in_group(info: dict[str, Any], job: dict[str, Any], queries: np.ndarray,
                   budget: float, index_bytes: int, folder: Path) -> dict[str, Any]:
    """Serve ``queries`` from the saved index of ``job`` in a child process under a memory
    limit of (its resident bytes after loading) + ``budget`` x ``index_bytes`` (+ headroom).

    Returns ``method`` (``cgroup-v1`` / ``cgroup-v2``), ``limit_bytes``, ``base_bytes`` (the
    group's charge before the first query), the group's ``limit_failures`` / ``oom_kills`` /
    ``peak_bytes`` / ``major_faults``, ``child_pid``, ``child_cgroup`` (the child's
    /proc/PID/cgroup line for memory, read while it ran), ``served`` and, when served, the
    numpy arrays ``cold`` / ``warm`` (ms) and ``ids``; when the child was OOM-killed,
    ``served`` is False and ``why`` says ``budget too small for this engine to serve``.
    ``folder`` is rwb's own and is removed."""
    folder.mkdir(parents=True, exist_ok=False)
    group = MemoryGroup.create(info)
    proc: subprocess.Popen[bytes] | None = None
    out: dict[str, Any] = {"method": f"cgroup-v{group.version}", "group": str(group.path)}
    try:
        with open(folder / "job.pkl", "wb") as fh:
            pickle.dump(job, fh)
        np.save(folder / "queries.npy", np.ascontiguousarray(queries))
        script = (f"echo $$ > {shlex.quote(str(group.procs))} || exit {NOT_MOVED}; exec "
                  f"{shlex.quote(sys.executable)} -m retrieval.tune.cold_child "
                  f"{shlex.quote(str(folder))}")
        # its stdout is not rwb's (a --json summary stays clean); its stderr (logs) is
        proc = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL)
        ready = _wait_ready(proc, folder / "ready.json", READY_TIMEOUT_S)
        out["child_pid"] = proc.pid
        out["child_cgroup"] = _memory_line(proc.pid)
        base = group.usage()
        limit = group_limit(base, budget, index_bytes)
        group.set_limit(limit)
        out.update(base_bytes=base, limit_bytes=limit, child_rss_bytes=ready["rss_bytes"],
                   drop_method=ready["drop_method"],
                   resident_after_drop=ready["resident_after_drop"])
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
        out.update(group.stats())
        if rc == 0:
            with np.load(folder / "result.npz") as res:
                out.update(served=True, cold=res["cold"], warm=res["warm"], ids=res["ids"],
                           major_faults=int(res["major_faults"]))
        elif rc == -9 and (out.get("oom_kills") or out.get("limit_failures")):
            out.update(served=False, why=f"{TOO_SMALL} (OOM-killed at a limit of "
                                         f"{limit:,} bytes)")
        else:
            raise BackendError(f"cold run: the child serving budget {budget:.0%} failed with "
                               f"exit status {rc} (its stderr above says why)")
        return out
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        group.remove()
        shutil.rmtree(folder, ignore_errors=True)


def group_limit(base_bytes: int, budget: float, index_bytes: int) -> int:
    """The group's limit in bytes: what is charged to it before the first query (``base_bytes``)
    + ``budget`` (a share) x ``index_bytes`` + :data:`HEADROOM_BYTES`."""
    return int(base_bytes) + int(budget * index_bytes) + HEADROOM_BYTES


def _memory_line(pid: int) -> str | None:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and ("memory" in parts[1].split(",") or parts[0] == "0"):
            return line
    return None


__all__ = ["HEADROOM_BYTES", "PREFIX", "TOO_SMALL", "MemoryGroup", "group_limit",
           "leftover_groups", "memory_cgroup", "serve_in_group"]
