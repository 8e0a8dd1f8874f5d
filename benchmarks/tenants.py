"""Tenant layouts (issue 31, item 2): 1,000 Zipf(1.1) tenants over 200k+ vectors on pgvector and
Qdrant edge (hnswlib beside them): per layout (one shared index with a tenant filter, one index
per tenant, flat below the crossover and an index above) the P5 and worst-1% tenant recall, the
p99 (ms, one query per call), the bytes per vector, the measured flat/index crossover and the
chosen layout (by p95 and by bytes), through ``rwb sweep`` of a spec with ``tenants:``.

Data: a clustered synthetic set (``--n`` base vectors x ``--dim``, ``--queries`` queries dealt
evenly over the tenants). pgvector needs a server: ``$RWB_PG_URL`` or ``rwb services start
pgvector``; an engine that is not reachable here is skipped with its reason. Printed, never
asserted: speed is not a test. The figures depend on the machine; the script prints the CPU model
and the load average before and after.

Usage: python benchmarks/tenants.py [--n 200000] [--dim 384] [--tenants 1000] [--queries 5000]
       [--engines pgvector,qdrant,hnswlib,lancedb,milvus,redis]
       (a quick proof: --n 3000 --dim 16 --tenants 20 --queries 100)
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from typing import Any

from retrieval.errors import BackendError, NotReachable
from retrieval.tune.runner import load_vectors
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

ENTRIES: dict[str, dict[str, Any]] = {
    "pgvector": {"backend": "pgvector", "build": {"m": 16, "ef_construction": 64},
                 "search": {"ef_search": [20, 40, 80, 160], "iterative_scan": "relaxed_order",
                            "max_scan_tuples": 20000}},
    "qdrant": {"backend": "qdrant", "build": {"m": 16, "ef_construct": 100},
               "search": {"hnsw_ef": [20, 40, 80, 160]}},
    "hnswlib": {"backend": "hnswlib", "build": {"M": 16, "ef_construction": 100},
                "search": {"ef_search": [20, 40, 80, 160]}},
    # the shared layout through LanceDB's where (prefilter), Milvus Lite's partition key and
    # Redis's TAG filter ($REDIS_URL)
    "lancedb": {"backend": "lancedb-hnsw",
                "build": {"num_partitions": 1, "m": 16, "ef_construction": 100},
                "search": {"ef": [20, 40, 80, 160]}},
    "milvus": {"backend": "milvus", "build": {"index_type": "HNSW", "M": 16,
                                              "efConstruction": 100},
               "search": {"ef": [20, 40, 80, 160]}},
    "redis": {"backend": "redis", "build": {"M": 16, "EF_CONSTRUCTION": 100},
              "search": {"EF_RUNTIME": [20, 40, 80, 160]}},
}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def spec_for(args: argparse.Namespace, engine: str) -> Any:
    return parse_spec({
        "name": f"tenants-{engine}",
        "dataset": {"kind": "synthetic", "n": args.n, "dim": args.dim,
                    "n_queries": args.queries, "n_clusters": 64, "metric": "cosine"},
        "k": 10, "target_recall": args.target, "warmup": 0, "threads": 1,
        "indexes": [ENTRIES[engine]],
        "tenants": {"count": args.tenants, "sizes": {"zipf": 1.1},
                    "min_queries": args.min_queries},
    })


def report(engine: str, s: dict[str, Any], elapsed: float) -> None:
    t = s["tenants"]
    print(f"\n== {engine}: {t['source']}, sizes {t['sizes']['min']}-{t['sizes']['max']} "
          f"(median {t['sizes']['median']:g}); {elapsed:.0f} s")
    print(f"{'layout':<11} {'knob':<44} {'P5':>6} {'worst1%':>7} {'meeting':>7} {'p95 ms':>8} "
          f"{'p99 ms':>8} {'bytes/vec':>9} {'crossover':>9}")
    for p in s["layouts"]:
        knob = ",".join(f"{k}={v}" for k, v in p["search"].items())[:44]
        print(f"{p['layout']:<11} {knob:<44} {p['tenant_recall_p5']:>6.3f} "
              f"{p['tenant_recall_worst1pct']:>7.3f} {p['tenants_meeting']:>7.3f} "
              f"{p['p95_ms']:>8.3f} {p['p99_ms']:>8.3f} "
              f"{(p['bytes_per_vector'] or float('nan')):>9.1f} "
              f"{'-' if p.get('crossover') is None else p['crossover']:>9}")
    cross = (s.get("crossover") or {}).get("size")
    print(f"flat/index crossover (tenant rows): {cross if cross is not None else 'none'}")
    for by, a in s["answer"].items():
        print(f"chosen {by}: " + ("none meets" if not a else
                                  f"{a['layout']} {a['search']} p95 {a['p95_ms']:.3f} ms"))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--min-queries", type=int, default=5)
    ap.add_argument("--target", type=float, default=0.9)
    ap.add_argument("--engines", default="pgvector,qdrant,hnswlib")
    args = ap.parse_args()
    print(f"CPU {cpu_model()}, {os.cpu_count()} cores; load average before: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    ds = None
    for engine in args.engines.split(","):
        spec = spec_for(args, engine)
        ds = ds or load_vectors(spec)
        started = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                s = run_sweep(spec, f"{tmp}/run", dataset=ds).summary
        except (NotReachable, BackendError) as exc:
            print(f"\n== {engine}: not measurable here ({exc})")
            continue
        report(engine, s, time.perf_counter() - started)
    print(f"\nload average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
