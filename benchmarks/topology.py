"""Topology: the knob per segment count, and the per-segment rule against an independent
bisection (issue 31).

Data: the QQP MiniLM set (``qqp-minilm``, ~137k x 384, cosine; ``--n`` takes a seeded sample of
that many base rows) or, with ``--synthetic``, clustered Gaussian vectors N x 96 (l2). hnswlib
M 16 / ef_construction 100 and Qdrant edge m 16 / ef_construct 100 built as 1 / 4 / 16 / 64
segments (each segment an independent index searched with the same ef, the top-k merged; Qdrant
edge's own segment settings are not honoured by its embedded build, so Qdrant is segmented as
independent shards); target recall@10 0.95 (95% lower bound over the tuning
queries).

Printed, never asserted: per topology the cheapest ef_search (the sweep's target search), the
held-out recall (mean, P5, lower bound) and p50 / p99 (ms); then the per-segment rule
knob(n_seg) fitted on 1 / 4 / 16 segments, its prediction at 64 segments, and an independent
bisection at 64 segments (its own study): the error (goal: within 15%); with the CPU model and
the load average (the machine should be otherwise idle).

Qdrant edge is built as its own segments (one shard, ``default_segment_number`` S, one optimized
slice per segment); ``--shards`` builds S independent shards instead (as the first full-size run
did). ``--engines pgvector,lancedb`` measures the engines' native segments (pgvector hash
partitions, each with its own HNSW index; LanceDB fragments under one index) the same way.

Usage: python benchmarks/topology.py [--n 137000] [--synthetic] [--queries 1000]
[--engines hnswlib,qdrant,pgvector,lancedb] [--shards]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.tune.scale_run import sample_dataset
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep
from retrieval.tune.topology import fit_segment_rule

TARGET = 0.95
FIT_ON = [1, 4, 16]
HELD = 64


def clustered(n: int, nq: int, d: int = 96, seed: int = 0) -> VectorDataset:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(1000, d)).astype(np.float32) * 2.0
    base = c[rng.integers(0, 1000, n)] + rng.normal(size=(n, d)).astype(np.float32)
    q = c[rng.integers(0, 1000, nq)] + rng.normal(size=(nq, d)).astype(np.float32)
    return VectorDataset.from_arrays(base, q, "l2", name=f"blobs-{n}x{d}")


def dataset(args: argparse.Namespace) -> VectorDataset:
    if args.synthetic:
        return clustered(args.n or 137_000, args.queries)
    from retrieval.loaders.catalog import resolve_dataset

    ds = resolve_dataset("qqp-minilm", where="benchmark")
    if args.n and args.n < ds.n_base:
        rows = np.sort(np.random.default_rng(0).choice(ds.n_base, args.n, replace=False))
        ds = sample_dataset(ds, rows)
    return ds


#: index entries by engine name (--engines); Qdrant (its segments), pgvector (hash partitions,
#: needs $RWB_PG_URL) and LanceDB (fragments, one index over all of them) use their native
#: segments unless --shards
ENTRIES: dict[str, dict[str, Any]] = {
    "hnswlib": {"backend": "hnswlib", "build": {"M": 16, "ef_construction": 100}},
    "qdrant": {"backend": "qdrant", "build": {"m": 16, "ef_construct": 100}},
    "pgvector": {"backend": "pgvector", "build": {"m": 16, "ef_construction": 100}},
    "lancedb": {"backend": "lancedb-hnsw", "build": {"num_partitions": 1, "m": 16,
                                                     "ef_construction": 100}},
}


def study(ds: VectorDataset, segments: list[int], out: Path,
          engines: list[str], native: bool = True) -> list[dict[str, Any]]:
    spec = parse_spec({
        "name": f"topology-{'-'.join(map(str, segments))}", "dataset": "synthetic-small",
        "k": 10, "target_recall": TARGET, "threads": 1, "warmup": 8,
        "index_build": {"threads": os.cpu_count() or 1, "cache": False},
        "indexes": [ENTRIES[e] for e in engines],
        "topology": {"segments": segments, "maintain": False, "native": native},
    }, source="benchmark")
    rows: list[dict[str, Any]] = run_sweep(spec, out, dataset=ds).summary["topology"]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=None, help="base rows (a seeded sample)")
    ap.add_argument("--queries", type=int, default=1000, help="queries (--synthetic)")
    ap.add_argument("--synthetic", action="store_true", help="clustered vectors, not QQP")
    ap.add_argument("--engines", default="hnswlib,qdrant",
                    help=f"comma-separated, of {', '.join(ENTRIES)}")
    ap.add_argument("--shards", action="store_true",
                    help="independent shards instead of the engines' own segments")
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ENTRIES]
    if unknown:
        ap.error(f"--engines: {unknown[0]!r} is not one of {', '.join(ENTRIES)}")
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    print(f"CPU {cpu}, {os.cpu_count()} cores; load average before: {os.getloadavg()}")
    ds = dataset(args)
    print(f"data: {ds.name}, {ds.n_base:,} x {ds.dim}, {ds.n_queries} queries, {ds.metric}")
    with tempfile.TemporaryDirectory() as tmp:
        fitted = study(ds, FIT_ON, Path(tmp) / "fit", engines, not args.shards)
        held = study(ds, [HELD], Path(tmp) / "held", engines, not args.shards)
    print(f"{'index':<12} {'segments':>8} {'seg size':>9} {'ef':>5} {'recall':>7} {'p5':>6} "
          f"{'lb':>6} {'p50 ms':>7} {'p99 ms':>7}")
    for r in [*fitted, *held]:
        if r["knob"] is None:
            print(f"{r['label']:<12} {r['segments']:>8} {r['segment_size']:>9} {'-':>5}  "
                  f"{r.get('message')}")
            continue
        print(f"{r['label']:<12} {r['segments']:>8} {r['segment_size']:>9} {r['knob']:>5} "
              f"{r['recall']:>7.4f} {r['recall_p5']:>6.3f} {r['recall_lower']:>6.3f} "
              f"{r['p50_ms']:>7.3f} {r['p99_ms']:>7.3f}")
    for label in dict.fromkeys(r["label"] for r in fitted):
        mine = [r for r in fitted if r["label"] == label]
        rule = fit_segment_rule(ds.n_base, [r["segments"] for r in mine],
                                [r["knob"] for r in mine])
        other = [r for r in held if r["label"] == label]
        exact = other[0]["knob"] if other else None
        if rule is None or exact is None:
            print(f"{label}: no rule or no knob at {HELD} segments (segments too small or the "
                  f"target missed)")
            continue
        low, high = other[0]["range"]
        pred = rule.predict(HELD, low, high)
        err = (pred - exact) / exact
        print(f"{label}: rule {rule.fit.describe()} (n_seg = N/segments), fitted on {FIT_ON}: "
              f"{HELD} segments -> {pred}; independent bisection: {exact}; error "
              f"{100 * err:+.1f}% (goal within 15%: {'met' if abs(err) <= 0.15 else 'NOT met'})")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
