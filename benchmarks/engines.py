"""The same vectors and the same HNSW graph on every engine rwb runs (issue: Production engines).

Per engine (hnswlib, faiss-hnsw, milvus, qdrant, redis; pgvector where its backend exists), one
build with M / ef_construction in the engine's own names, then at equal ef: recall@10,
single-query p50 (ms), batch QPS, build seconds and bytes per vector (the backend's own memory
figure / n). Then rwb's measured single-query p50 on Qdrant vs a raw qdrant-edge loop on the
same shard and queries (goal: within 5%, ratio <= 1.05). Printed, never asserted.

Redis needs REDIS_URL (skipped otherwise); Milvus needs milvus-lite. ``--dataset NAME`` takes a
catalogue dataset (e.g. qqp-minilm-20k, real MiniLM vectors; needs ../shared/data), else a
synthetic one of ``--n`` x ``--dim``.

Usage: python benchmarks/engines.py [--n 20000] [--dim 96] [--queries 500] [--ef 16 64 256]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import time

import numpy as np

from retrieval.evaluation import Evaluator
from retrieval.loaders.synthetic import make_synthetic

M, EFC = 16, 100
#: engine -> (backend, build params in its names, its ef knob)
ENGINES = {
    "hnswlib": ("hnswlib", {"M": M, "ef_construction": EFC}, "ef_search"),
    "faiss-hnsw": ("faiss-hnsw", {"M": M, "ef_construction": EFC}, "ef_search"),
    "milvus": ("milvus", {"index_type": "HNSW", "M": M, "efConstruction": EFC}, "ef"),
    "qdrant": ("qdrant", {"m": M, "ef_construct": EFC}, "hnsw_ef"),
    "redis": ("redis", {"M": M, "EF_CONSTRUCTION": EFC}, "EF_RUNTIME"),
    "pgvector": ("pgvector", {"m": M, "ef_construction": EFC}, "ef_search"),
}


def available(name: str) -> str | None:
    """Why ``name`` cannot run here, or None."""
    from retrieval.indexes.registry import all_backends

    backend = ENGINES[name][0]
    if backend not in all_backends():
        return "backend not in this checkout"
    if name == "redis" and not os.environ.get("REDIS_URL"):
        return "REDIS_URL not set"
    if name == "milvus" and importlib.util.find_spec("milvus_lite") is None:
        return "milvus-lite not installed"
    missing = [m for m in all_backends()[backend].requires if importlib.util.find_spec(m) is None]
    return f"missing {', '.join(missing)}" if missing else None


def raw_qdrant_p50(index, queries: np.ndarray, ef: int, k: int, warmup: int) -> float:
    """p50 (ms) of a bare qdrant-edge loop: QueryRequest + EdgeShard.query per query."""
    import qdrant_edge as q

    shard = index._shard
    params = q.SearchParams(hnsw_ef=ef, exact=False)
    rows = [queries[i] for i in range(len(queries))]
    for r in rows[:warmup]:
        shard.query(q.QueryRequest(limit=k, query=q.Query.Nearest(r), params=params))
    lat = np.empty(len(rows), dtype=np.int64)
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for i, r in enumerate(rows):
            t0 = clock()
            shard.query(q.QueryRequest(limit=k, query=q.Query.Nearest(r), params=params))
            lat[i] = clock() - t0
    finally:
        gc.enable()
    return float(np.percentile(lat / 1e6, 50))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", help="a catalogue dataset name (default: synthetic)")
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=96)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--ef", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the rwb-vs-raw comparison")
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    if args.dataset:
        from retrieval.loaders.catalog import resolve_dataset

        ds = resolve_dataset(args.dataset)
    else:
        ds = make_synthetic(args.n, args.dim, args.queries, seed=7, metric="cosine")
    k, warmup = args.k, 32
    print(f"dataset {ds.name}: {ds.n_base} x {ds.dim} {ds.metric}, {ds.n_queries} queries, "
          f"k={k}, M={M}, ef_construction={EFC}, threads=1")
    print(f"{'engine':<11} {'ef':>4} {'recall@10':>9} {'p50_ms':>8} {'batch_qps':>9} "
          f"{'build_s':>8} {'bytes/vec':>9}")
    qdrant_ratio = None
    with Evaluator(ds, k, threads=1, warmup=warmup, batch_repeats=3) as ev:
        for name, (backend, build, knob) in ENGINES.items():
            why = available(name)
            if why:
                print(f"{name:<11} skipped: {why}")
                continue
            built = ev.build(backend, build)
            per_vec = (built.memory_bytes or 0) / ds.n_base
            for ef in args.ef:
                single, batch = ev.measure(built, {knob: max(ef, k)})
                p50 = float(np.percentile(single.latency_ms, 50))
                print(f"{name:<11} {ef:>4} {single.recall:>9.4f} {p50:>8.4f} {batch.qps:>9.0f} "
                      f"{built.info.build_s:>8.2f} {per_vec:>9.0f}")
            if name == "qdrant":
                ratios = []
                ef = max(args.ef[len(args.ef) // 2], k)
                for _ in range(args.rounds):
                    single, _ = ev.measure(built, {knob: ef})
                    rwb = float(np.percentile(single.latency_ms, 50))
                    raw = raw_qdrant_p50(built.index, ds.queries, ef, k, warmup)
                    ratios.append(rwb / raw)
                qdrant_ratio = (ef, statistics.median(ratios), rwb, raw)
            ev.release(built)
    if qdrant_ratio is not None:
        ef, ratio, rwb, raw = qdrant_ratio
        print(f"qdrant single-query p50 at hnsw_ef={ef}: rwb {rwb:.4f} ms, raw qdrant-edge loop "
              f"{raw:.4f} ms, ratio {ratio:.3f} (median of {args.rounds} rounds; goal <= 1.05) "
              f"{'MET' if ratio <= 1.05 else 'NOT MET'}")


if __name__ == "__main__":
    main()
