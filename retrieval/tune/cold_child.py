"""The child process that serves one RAM budget of a cold run inside a memory cgroup (issue 31).

Run by :func:`retrieval.tune.cgroup.serve_in_group` as ``python -m retrieval.tune.cold_child
FOLDER`` already inside rwb's group. It loads everything except the index pages (interpreter,
numpy, the engine, the queries; it opens the saved index and drops the index files' pages),
writes ``ready.json`` and waits for ``go`` on stdin (the parent sets the limit meanwhile); it then
searches the queries one at a time (a cold pass, then the warm passes) and saves the latencies
(ms), the ids and its major page faults to ``result.npz``.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import sys
from pathlib import Path

import numpy as np


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child_main(folder: Path) -> int:
    """The child's side (run by ``python -m retrieval.tune.cold_child FOLDER``)."""
    from retrieval.indexes.registry import create_index
    from retrieval.tune.coldpass import WARM_PASSES, drop_pages, resident_fraction, timed_pass

    with open(folder / "job.pkl", "rb") as fh:
        job = pickle.load(fh)  # written by the parent rwb process, in its folder
    queries = np.load(folder / "queries.npy")
    (folder / "work").mkdir(exist_ok=True)  # the engine's fresh copy of the index, if any
    idx = create_index(job["backend"], job["dim"], job["metric"], job["build"],
                       seed=job["seed"], threads=job["threads"], workdir=folder / "work")
    try:
        files = idx.open_cold(Path(job["snapshot"]), job["n"])  # type: ignore[attr-defined]
        idx.set_search_params(**job["search"])
        method = drop_pages(files)
        ready = {"pid": os.getpid(), "rss_bytes": _rss_bytes(), "drop_method": method,
                 "resident_after_drop": resident_fraction(files)}
        tmp = folder / "ready.tmp"
        tmp.write_text(json.dumps(ready))
        tmp.rename(folder / "ready.json")
        if sys.stdin.readline().strip() != "go":
            return 1
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        cold, _ = timed_pass(idx, queries, job["k"])
        warm = ids = None
        for _ in range(WARM_PASSES):
            warm, ids = timed_pass(idx, queries, job["k"])
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults
        assert warm is not None and ids is not None
        np.savez(folder / "result.npz", cold=cold, warm=warm, ids=ids,
                 major_faults=np.int64(faults))
    finally:
        idx.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - run as the child process
    sys.exit(child_main(Path(sys.argv[1])))
