"""Which cgroup memory limit this machine offers (for the RAM budgets of a cold run).

cgroup v2 has ``memory.max`` in the unified hierarchy (``/sys/fs/cgroup/cgroup.controllers``
present); cgroup v1 has ``memory.limit_in_bytes`` in the ``memory`` controller's hierarchy
(``/sys/fs/cgroup/memory``). :func:`memory_cgroup` says which, and whether rwb could create a
child group there (the folder writable). A cold run does not apply either: a limit charges the
whole process (the interpreter, numpy, the dataset, the ground truth), not the index's pages
alone, so a budget of 25% of a small index would OOM-kill rwb instead of measuring a cold cache.
The budgets use the ``fadvise-window`` approximation (:mod:`retrieval.tune.cold`), and the
summary names both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ROOT = Path("/sys/fs/cgroup")

NOT_USED = ("not applied: a cgroup memory limit charges the whole rwb process (interpreter, "
            "numpy, the dataset), not only the index's pages; the budgets use fadvise-window")


def memory_cgroup(root: Path = ROOT) -> dict[str, Any]:
    """``version`` (2, 1 or None), ``limit_file`` (the limit's file name), ``path`` (the
    hierarchy), ``writable`` (a child group could be created), ``used`` (always False) and
    ``why``."""
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
    writable = version is not None and os.access(path, os.W_OK)
    return {"version": version, "limit_file": limit, "path": str(path) if version else None,
            "writable": bool(writable), "used": False,
            "why": NOT_USED if version else "no cgroup memory controller found"}


__all__ = ["NOT_USED", "memory_cgroup"]
