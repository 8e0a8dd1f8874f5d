"""Memory as the objective (issue 23): measured bytes per vector against recall and latency.

Dataset (default) qqp-minilm: 137k Quora questions, all-MiniLM-L6-v2 384-d, cosine; recall@10
target 0.95 judged, as in `rwb sweep`, by the 95% bootstrap lower bound over the tuning half of
the queries. Printed, never asserted:

1. per engine (Faiss IVF: float32 / SQ8 / SQ4 / RaBitQ, RaBitQ and SQ4 + exact refine; Qdrant:
   float32 / scalar / binary, rescored): the smallest measured resident bytes per vector whose
   recall lower bound meets the target, its p95 and the float32 build's p95, and the measured
   vs the claimed (nominal) bytes per vector with the memory doctor's flags;
2. the joint two-knob search (nprobe x refine k_factor on IVF RaBitQ + refine, see
   retrieval/tune/joint.py) against a grid over the same two knobs: evaluations of each and
   whether they find the same cheapest pair (goal: the same pair in <= 1/3 of the
   evaluations). Cost of a pair = its measured batch ms per query (each pair measured once,
   shared by both searches).

Usage: python benchmarks/memory.py [--dataset qqp-minilm] [--target 0.95] [--engines faiss,qdrant]
       python benchmarks/memory.py --dataset synthetic-small --target 0.9 --engines faiss  (smoke)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from retrieval.evaluation import Evaluator
from retrieval.loaders.catalog import resolve_dataset
from retrieval.tune import joint
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import split_queries
from retrieval.tune.measure import Measurer
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

ENTRIES: dict[str, list[dict[str, Any]]] = {
    "faiss": [
        {"backend": "faiss-ivf", "label": "faiss-ivf",
         "build": {"nlist": 256, "encoding": ["flat", "sq8", "sq4", "rabitq"]},
         "search": {"nprobe": 1}},
        {"backend": "faiss-ivf", "label": "faiss-ivf-refine",
         "build": {"nlist": 256, "encoding": ["sq4", "rabitq"], "refine": True},
         "search": {"nprobe": 1}},
    ],
    "qdrant": [
        {"backend": "qdrant", "label": "qdrant", "build": {"m": 16, "ef_construct": 100},
         "search": {"hnsw_ef": 16}},
        {"backend": "qdrant", "label": "qdrant-quantized",
         "build": {"m": 16, "ef_construct": 100, "quantization": ["scalar", "binary"]},
         "search": {"hnsw_ef": 16, "rescore": True}},
    ],
}
RESCORE = {"faiss-ivf-refine": "k_factor", "qdrant-quantized": "oversampling"}


def part1(dataset: str, target: float, engines: list[str], out: Path) -> None:
    entries = [e for name in engines for e in ENTRIES[name]]
    spec = parse_spec({
        "name": "memory-bench", "dataset": dataset, "k": 10, "seed": 0, "threads": 1,
        "modes": ["single", "batch"], "warmup": 16, "batch_repeats": 2,
        "target_recall": target, "indexes": entries,
        "tune": {"strategy": "target", "objective": "bytes_per_vector",
                 "rescore_knobs": {k: v for k, v in RESCORE.items()
                                   if any(e["label"] == k for e in entries)}},
    }, source="benchmarks/memory.py")
    t0 = time.perf_counter()
    s = run_sweep(spec, out).summary
    print(f"\n== 1. smallest measured bytes/vector meeting recall@10 lb >= {target} "
          f"({s['evaluations']} evaluations, {time.perf_counter() - t0:.0f} s)")
    print(f"{'entry':18} {'build':34} {'search':26} {'B/vec':>7} {'claim':>7} {'x f32':>6} "
          f"{'recall_lb':>9} {'p95 ms':>7}  flags")
    f32_p95 = {}
    for b in s["builds"]:
        c = b["chosen"]
        if c is None:
            print(f"{b['label']:18} {b['build']!s:34} (none meets the target)")
            continue
        mem = c.get("memory") or {}
        if b["build"].get("encoding", b["build"].get("quantization", "none")) in ("flat", "none"):
            f32_p95[b["backend"]] = c.get("p95_ms")
        print(f"{b['label']:18} {b['build']!s:34} {c['search']!s:26} "
              f"{c['bytes_per_vector']:7.0f} {mem.get('claimed_bytes_per_vector') or 0:7.0f} "
              f"{mem.get('ratio_to_float32') or 0:6.2f} {c['recall_lb']:9.4f} "
              f"{c.get('p95_ms') or float('nan'):7.3f}  {'; '.join(mem.get('flags') or [])}")
    print("\nper entry (fewest bytes meeting the target; float32 p95 for comparison):")
    for label, b in s["backends"].items():
        c = b["chosen"]
        if c is None:
            print(f"  {label}: none meets the target")
            continue
        print(f"  {label}: {c['bytes_per_vector']:.0f} B/vector ({c['build']}, {c['search']}), "
              f"p95 {c.get('p95_ms') or float('nan'):.3f} ms vs float32 "
              f"{f32_p95.get(b['backend']) or float('nan'):.3f} ms; resident figure: "
              f"{(c.get('memory') or {}).get('resident_source')}")


def part2(dataset: str, target: float) -> None:
    ds = resolve_dataset(dataset)
    split = split_queries(ds.n_queries, 0.5, 0)
    conf = ConfidenceSpec()
    build = {"nlist": 128, "encoding": "rabitq", "refine": True}
    ladder = (1, 2, 4, 8, 16)
    with Evaluator(ds, 10, threads=1, seed=0, warmup=8, batch_repeats=1) as ev:
        m = Measurer(ev, split, ["batch"], target, conf, 0)
        built = ev.build("faiss-ivf", build)
        seen: dict[tuple[int, int], tuple[bool, float]] = {}

        def measure(a: int, b: int) -> tuple[bool, float]:
            if (a, b) not in seen:
                r = m.probe(built, {"nprobe": a, "k_factor": b})
                seen[a, b] = (bool(r.meets), 1000.0 / float(r.qps or 1e-9))
            return seen[a, b]

        def meets(a: int, b: int) -> bool:
            return measure(a, b)[0]

        def cost(a: int, b: int) -> float:
            return measure(a, b)[1]

        t0 = time.perf_counter()
        out = joint.solve(1, 128, ladder, meets, cost)
        t_joint = time.perf_counter() - t0
        t0 = time.perf_counter()
        best, n_grid = joint.grid_best(range(1, 129), ladder, meets, cost)
        t_grid = time.perf_counter() - t0
    print("\n== 2. joint (nprobe x k_factor) on IVF128,RaBitQ,RFlat vs the grid over both")
    print(f"  staircase (k_factor, smallest nprobe): {list(out.staircase)}")
    print(f"  joint: {out.evaluations} evaluations, best {out.best}; grid: {n_grid} "
          f"evaluations, best {best}; same pair: {out.best == best}; joint/grid "
          f"{out.evaluations / n_grid:.3f} (goal <= 0.333); wall {t_joint:.1f} s vs "
          f"{t_grid:.1f} s (grid reuses the joint's measurements)")
    if out.best != best and best is not None and out.best is not None:
        print(f"  cost of joint's pair {cost(*out.best):.4f} ms/query vs grid's "
              f"{cost(*best):.4f} (measured batch cost is not exactly monotone)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="qqp-minilm")
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--engines", default="faiss,qdrant")
    ap.add_argument("--skip-joint", action="store_true")
    args = ap.parse_args()
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    print(f"dataset {args.dataset}, target {args.target}, cpu {cpu}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="rwb-membench-") as tmp:
        part1(args.dataset, args.target, args.engines.split(","), Path(tmp) / "run")
    if not args.skip_joint:
        part2(args.dataset, args.target)
    print(f"\nload average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
