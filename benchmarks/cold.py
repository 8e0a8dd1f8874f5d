"""Cold caches: cold vs warm p99 and queries-to-warm for file-backed indexes (issue 31).

Data: clustered Gaussian vectors N x 96 (default 1,000,000; ``--n`` to shrink), 1,000 queries,
l2. Indexes: Faiss IVF-Flat and Faiss HNSW served from their files (``IO_FLAG_MMAP``), Qdrant's
engine with on-disk vectors and HNSW (extra 'qdrant'), LanceDB IVF_PQ (extra 'lancedb'):
``rwb sweep`` with ``cold: true`` and a target recall@10 of 0.9 (so the RAM budgets 25 / 50 /
100% are measured too). The page drop is posix_fadvise(DONTNEED) on the index files (the output
names the method).

Printed, never asserted: per index the knob, cold p99 (first 32 queries after the drop), warm
p99, the ratio, queries to warm (1.2x of warm p99 over a window of 32), and per budget the cold
and warm p99 with the method (a cgroup memory limit on a child process where the machine allows
it: then also the limit, how often it was hit and the child's major page faults; an engine
OOM-killed at a budget is "budget too small for this engine to serve"); with the CPU model and
the load average (the machine should be otherwise idle).

``--pgvector`` adds pgvector IVFFlat (see docs/topology.md: a restart of rwb's own server + the
table's files dropped from the page cache; budgets are ``shared_buffers``, not a cgroup).

Usage: python benchmarks/cold.py [--n 1000000] [--queries 1000] [--pgvector]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep


def clustered(n: int, nq: int, d: int = 96, seed: int = 0, chunk: int = 200_000
              ) -> VectorDataset:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(1000, d)).astype(np.float32) * 2.0
    base = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        base[start:stop] = c[rng.integers(0, 1000, stop - start)]
        base[start:stop] += rng.normal(size=(stop - start, d)).astype(np.float32)
    q = c[rng.integers(0, 1000, nq)] + rng.normal(size=(nq, d)).astype(np.float32)
    return VectorDataset.from_arrays(base, q, "l2", name=f"blobs-{n}x{d}")


def entries(n: int, pgvector: bool = False) -> list[dict[str, Any]]:
    nlist = max(4, min(4096, int(4 * n ** 0.5)))
    out: list[dict[str, Any]] = [
        {"backend": "faiss-ivf", "build": {"nlist": nlist}, "search": {"nprobe": 1}},
        {"backend": "faiss-hnsw", "build": {"M": 16, "ef_construction": 100},
         "search": {"ef_search": 10}},
    ]
    if importlib.util.find_spec("qdrant_edge") is not None:
        out.append({"backend": "qdrant", "build": {"m": 16, "ef_construct": 100, "on_disk": True},
                    "search": {"hnsw_ef": 10}})
    if importlib.util.find_spec("lancedb") is not None:
        out.append({"backend": "lancedb-ivfpq",
                    "build": {"num_partitions": max(2, min(256, n // 256)),
                              "num_sub_vectors": 16},
                    "search": {"nprobes": 1, "refine_factor": 10}})
    if pgvector:  # its own server when $RWB_PG_URL is unset (restarted per cold pass)
        out.append({"backend": "pgvector-ivfflat", "build": {"lists": nlist},
                    "search": {"probes": 1}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--pgvector", action="store_true",
                    help="also pgvector-ivfflat (rwb's own PostgreSQL when $RWB_PG_URL is unset: "
                         "a cold pass restarts it; budgets are its shared_buffers)")
    args = ap.parse_args()
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    print(f"CPU {cpu}, {os.cpu_count()} cores; load average before: {os.getloadavg()}")
    ds = clustered(args.n, args.queries)
    spec = parse_spec({
        "name": "cold", "dataset": "synthetic-small", "k": 10, "target_recall": 0.9,
        "threads": 1, "warmup": 0, "cold": True,
        "index_build": {"threads": os.cpu_count() or 1, "cache": False},
        "indexes": entries(args.n, args.pgvector),
    }, source="benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        s = run_sweep(spec, Path(tmp) / "run", dataset=ds).summary
    print(f"data: {ds.name}, {ds.n_base:,} x {ds.dim}, {ds.n_queries} queries; "
          f"{s['cold_info']['definitions']}")
    for r in s["cold"]:
        ratio = r["cold_p99_ms"] / r["warm_p99_ms"] if r["warm_p99_ms"] else float("nan")
        size = r["index_file_bytes"] or r.get("relation_bytes") or 0
        print(f"{r['label']:<14} {r['search']}: {size / 1e6:,.1f} MB, cold p99 "
              f"{r['cold_p99_ms']:.3f} ms, warm p99 {r['warm_p99_ms']:.3f} ms ({ratio:.1f}x), "
              f"queries to warm {r['queries_to_warm']}, recall lb {r['recall_lower']:.3f}, "
              f"drop {r['drop_method']}, resident after drop {r['resident_after_drop']}"
              + (f"; not done: {r['drop_reason']}" if r.get("drop_reason") else ""))
        for b in r.get("budgets") or []:
            if not b.get("served", True):
                print(f"    budget {b['budget']:>4.0%} ({b.get('method')}): {b.get('why')}")
                continue
            extra = (f", limit {b['limit_bytes'] / 1e6:,.1f} MB, limit hit "
                     f"{b.get('limit_failures')} times, major faults {b.get('major_faults')}"
                     if b.get("limit_bytes") is not None else
                     f", shared_buffers {b['shared_buffers']}" if b.get("shared_buffers") else "")
            print(f"    budget {b['budget']:>4.0%} ({b.get('method')}): cold p99 "
                  f"{b['cold_p99_ms']:.3f} ms, warm p99 {b['warm_p99_ms']:.3f} ms, queries to "
                  f"warm {b['queries_to_warm']}{extra}")
    print(f"RAM budgets: {s['cold_info']['budget_method']}")
    cg = s["cold_info"].get("cgroup") or {}
    print(f"cgroup: version {cg.get('version')} ({cg.get('limit_file')}, usable "
          f"{cg.get('usable')}, used {cg.get('used')}): {cg.get('why')}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
