"""Exact ground truth out of core at scale (issue 21, benchmark of items 1-2).

Writes a clustered float32 base of N x 96 (default 2,000,000; ``--n 10000000`` for the 10M x 96,
3.8 GB case) chunk by chunk into an ``.npy`` file, memory-maps it, and measures side by side in
one run:

1. out-of-core ground truth (:func:`retrieval.groundtruth.ooc.exact_topk`, chunks of about
   32 MB, a running top-k merge; each chunk's file pages released from the resident set once
   searched) in a fresh process: wall seconds and peak RSS (``VmHWM``: file pages touched
   through the map count) (goal: peak RSS <= 1 GB on the 10M x 96 base);
2. in-memory Faiss flat (the whole base loaded, ``IndexFlatL2``, one search; skipped with
   ``--no-in-memory`` or when the base does not fit) in a fresh process: wall seconds and
   peak RSS; throughput ratio OOC / in-memory (goal >= 0.8x on the 2M set);
3. equality of the two results (ids, rwb's tie rule) (goal: equal on the 2M set).

Each measurement runs in its own process so that peak RSS is that computation's. Printed,
never asserted; the load average and the CPU model are printed with the figures.
Usage: python benchmarks/groundtruth_scale.py [--n 2000000] [--queries 1000] [--k 100]
       [--dir FOLDER] (``--n 200000 --queries 200`` for a quick check that it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DIM = 96

CHILD = """
import json, resource, sys, time
import numpy as np
mode, base_path, q_path, k, out = sys.argv[1:6]
k = int(k)
q = np.load(q_path)
t0 = time.perf_counter()
if mode == "ooc":
    from retrieval.groundtruth.ooc import exact_topk
    base = np.load(base_path, mmap_mode="r")
    _, ids = exact_topk(base, q, "l2", k)
else:
    from retrieval.groundtruth.exact import exact_knn
    base = np.load(base_path)
    ids = exact_knn(base, q, "l2", k).ids
wall = time.perf_counter() - t0
np.save(out, ids)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
try:  # this process's own peak (ru_maxrss also keeps the parent's size at the fork)
    with open("/proc/self/status") as fh:
        peak = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:")) * 1024
except (OSError, StopIteration):
    pass
print(json.dumps({"wall_s": wall, "peak_rss_bytes": peak}))
"""


def write_base(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(256, DIM)).astype(np.float32) * 3
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, DIM))
    step = 250_000
    for lo in range(0, n, step):
        m = min(n, lo + step) - lo
        out[lo:lo + m] = centres[rng.integers(0, 256, m)] + rng.normal(size=(m, DIM))
    out.flush()
    del out


def run(mode: str, base: Path, queries: Path, k: int, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(base), str(queries), str(k),
                           str(out)], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--dir", type=Path, default=None, help="folder for the base (default: temp)")
    ap.add_argument("--no-in-memory", action="store_true")
    args = ap.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="rwb-gt-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    base, queries = folder / f"base-{args.n}x{DIM}.npy", folder / "queries.npy"
    if not base.is_file():
        t0 = time.perf_counter()
        write_base(base, args.n)
        print(f"wrote {base} ({base.stat().st_size / 1e9:.2f} GB) in "
              f"{time.perf_counter() - t0:.1f} s")
    rng = np.random.default_rng(1)
    np.save(queries, np.asarray(np.load(base, mmap_mode="r")[
        np.sort(rng.choice(args.n, args.queries, replace=False))]) + 0.1)
    with open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "?")
    print(f"CPU {cpu}; {os.cpu_count()} CPUs; load average before {os.getloadavg()}")
    print(f"base {args.n:,} x {DIM} ({base.stat().st_size / 1e9:.2f} GB on disk), "
          f"{args.queries} queries, k {args.k}")
    ooc = run("ooc", base, queries, args.k, folder / "ids-ooc.npy")
    print(f"out of core: {ooc['wall_s']:.1f} s ({args.n / ooc['wall_s']:,.0f} base vectors/s), "
          f"peak RSS {ooc['peak_rss_bytes'] / 1e9:.2f} GB (goal <= 1 GB on 10M x 96)")
    fits = args.n * DIM * 4 < 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if not args.no_in_memory and fits:
        mem = run("memory", base, queries, args.k, folder / "ids-mem.npy")
        equal = np.array_equal(np.load(folder / "ids-ooc.npy"), np.load(folder / "ids-mem.npy"))
        print(f"in memory (Faiss flat): {mem['wall_s']:.1f} s "
              f"({args.n / mem['wall_s']:,.0f} base vectors/s), peak RSS "
              f"{mem['peak_rss_bytes'] / 1e9:.2f} GB")
        print(f"throughput OOC / in-memory: {mem['wall_s'] / ooc['wall_s']:.2f}x (goal >= 0.8x)")
        print(f"ids equal: {equal} (goal: equal)")
    else:
        print("in-memory comparison skipped")
    print(f"load average after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
