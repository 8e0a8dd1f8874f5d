"""rwb adapter + evaluation-loop overhead vs raw library loops (issue: Foundation, Performance).

For hnswlib and faiss HNSW on the same built index and the same queries:
- batch QPS measured by rwb's Evaluator (batch mode, best of N) / QPS of a raw library batch call
  (best of N)                                                           goal >= 0.97
- single-query p50 (ms) measured by rwb / p50 of a raw per-query loop   goal <= 1.05

Both sides use perf_counter_ns, the same warm-up and the same queries, interleaved in rounds, and
the median ratio over rounds is reported. Printed, never asserted: speed is not a test.

Usage: python benchmarks/adapter_overhead.py [--n 20000] [--dim 96] [--queries 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

from retrieval.evaluation import Evaluator
from retrieval.loaders.synthetic import make_synthetic


def raw_single(search, queries: np.ndarray) -> np.ndarray:
    lat = np.empty(len(queries), dtype=np.int64)
    rows = [queries[i : i + 1] for i in range(len(queries))]
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for i, q in enumerate(rows):
            t0 = clock()
            search(q)
            lat[i] = clock() - t0
    finally:
        gc.enable()
    return lat / 1e6


def raw_batch(search, queries: np.ndarray, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        search(queries)
        best = min(best, (time.perf_counter_ns() - t0) / 1e9)
    return len(queries) / best


def raw_searchers(backend: str, index, ef: int, k: int):
    if backend == "hnswlib":
        lib = index._index
        lib.set_ef(ef)
        return lambda q: lib.knn_query(q, k=k, num_threads=1)
    import faiss

    lib = index._index
    params = faiss.SearchParametersHNSW(efSearch=ef)
    return lambda q: lib.search(q, k, params=params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=96)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    ds = make_synthetic(args.n, args.dim, args.queries, seed=7)
    k = args.k
    print(f"dataset {ds.name}, {args.queries} queries, k={k}, threads=1, rounds={args.rounds}")
    print(f"{'backend':<11} {'ef':>4} {'rwb_p50_ms':>10} {'raw_p50_ms':>10} {'p50_ratio':>9} "
          f"{'rwb_qps':>9} {'raw_qps':>9} {'qps_ratio':>9}")
    verdicts = []
    with Evaluator(ds, k, threads=1, warmup=64, batch_repeats=3) as ev:
        for backend in ("hnswlib", "faiss-hnsw"):
            built = ev.build(backend, {"M": 16, "ef_construction": 100})
            for ef in (16, 64, 256):
                p50_r, qps_r, rows = [], [], []
                for _ in range(args.rounds):
                    single, batch = ev.measure(built, {"ef_search": ef})
                    raw = raw_searchers(backend, built.index, ef, k)
                    for i in range(64):  # same warm-up as the evaluator
                        raw(ds.queries[i : i + 1])
                    raw_p50 = float(np.percentile(raw_single(raw, ds.queries), 50))
                    raw_qps = raw_batch(raw, ds.queries, 3)
                    rwb_p50 = float(np.percentile(single.latency_ms, 50))
                    p50_r.append(rwb_p50 / raw_p50)
                    qps_r.append(batch.qps / raw_qps)
                    rows.append((rwb_p50, raw_p50, batch.qps, raw_qps))
                med = rows[int(np.argsort(p50_r)[len(p50_r) // 2])]
                pr, qr = statistics.median(p50_r), statistics.median(qps_r)
                verdicts.append((backend, ef, pr, qr))
                print(f"{backend:<11} {ef:>4} {med[0]:>10.4f} {med[1]:>10.4f} {pr:>9.3f} "
                      f"{med[2]:>9.0f} {med[3]:>9.0f} {qr:>9.3f}")
    worst_p50 = max(v[2] for v in verdicts)
    worst_qps = min(v[3] for v in verdicts)
    print(f"worst single-query p50 ratio rwb/raw: {worst_p50:.3f} (goal <= 1.05) "
          f"{'MET' if worst_p50 <= 1.05 else 'NOT MET'}")
    print(f"worst batch QPS ratio rwb/raw: {worst_qps:.3f} (goal >= 0.97) "
          f"{'MET' if worst_qps >= 0.97 else 'NOT MET'}")


if __name__ == "__main__":
    main()
