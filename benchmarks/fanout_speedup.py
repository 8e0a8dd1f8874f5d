"""Fan-out over 3 collections vs serial, per backend (issue 4, Performance). Printed, never
asserted.

For each backend, all three collections of ``sweeps/fanout-3-collections.yaml`` (20k QQP
questions, 20k Reuters paragraphs, 5,183 SciFact abstracts; MiniLM 384-d, cosine) go on that
backend and the SciFact claims are answered serially, with a thread pool and with asyncio.
Printed per backend: per-query p50/p95 (ms) per mode, speedup = serial p50 / mode p50 (the
median over ``--rounds`` rounds in which the modes are interleaved), CPU cores busy (and
run-queue wait: cores wanted but taken by other processes) and the verdict.
Goals (2 cores): hnswlib and faiss >= 1.7x (they release the GIL); Milvus Lite in-process
~1x expected (its gRPC server runs in this process's threads); Milvus Lite as a server process
reached by URI: reported as measured; ``milvus-servers``: each collection on its own Milvus Lite
server process, so a parallel fan-out waits on three processes at once (waiting-bound, not
CPU-bound in this process): goal >= 2x over serial for 3 collections.

The embeddings are computed once (cached on disk) and shared by every backend.

Usage: python benchmarks/fanout_speedup.py [--spec sweeps/fanout-3-collections.yaml]
       [--backends hnswlib,faiss-hnsw,milvus,milvus-server,milvus-servers] [--queries 300]
       [--ef 64]
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import replace

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", default="sweeps/fanout-3-collections.yaml")
    ap.add_argument("--backends",
                    default="hnswlib,faiss-hnsw,milvus,milvus-server,milvus-servers")
    ap.add_argument("--queries", type=int, help="number of queries (default: the spec's)")
    ap.add_argument("--ef", type=int, help="ef_search / ef for every HNSW collection")
    ap.add_argument("--rounds", type=int, default=5,
                    help="modes interleaved N times; speedup = median over rounds")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from retrieval.bench.fanout.prepare import prepare_collections, prepare_queries
    from retrieval.bench.fanout.run import run_fanout_bench
    from retrieval.bench.fanout.spec import (
        DEFAULT_PARAMS,
        load_fanout_spec,
        parse_fanout_spec,
        with_backend,
    )
    from retrieval.runs import cpu_info

    spec = load_fanout_spec(args.spec)
    data = spec.model_dump(mode="json")
    data["rounds"] = args.rounds
    if args.queries:
        data["queries"]["n"] = args.queries
    spec = parse_fanout_spec(data, source=spec.source)
    cpu = cpu_info()
    print(f"CPU {cpu['model']} ({cpu['logical_cpus']} logical CPUs); spec {spec.source}")
    prepared = prepare_collections(spec)
    queries = prepare_queries(spec)
    print("collections: " + ", ".join(f"{p.spec.name}={len(p.doc_ids)}" for p in prepared)
          + f"; {len(queries.ids)} queries, k={spec.k}")
    results = {}
    for label in args.backends.split(","):
        per = label.endswith("-servers")
        backend = label.removesuffix("-servers").removesuffix("-server")
        server = per or label.endswith("-server")
        build, search = DEFAULT_PARAMS[backend]
        if args.ef and "ef_search" in search:
            search = {"ef_search": args.ef}
        elif args.ef and "ef" in search:
            search = {"ef": args.ef}
        variant = with_backend(spec, backend, server=server, build=build, search=search,
                               servers="per-collection" if per else "shared")
        same_vectors = [replace(p, spec=c) for p, c in zip(prepared, variant.collections)]
        res = run_fanout_bench(variant, prepared=same_vectors, queries=queries)
        s = res.summary
        results[label] = s
        print(f"\n[{label}] build/search {build} {search}")
        for mode, m in s["modes"].items():
            print(f"  {mode:8s} p50 {m['p50_ms']:8.3f} ms  p95 {m['p95_ms']:8.3f} ms  "
                  f"speedup {m.get('speedup_p50') or 1.0:5.2f}x  cores {m['cpu_cores']:.2f} "
                  f"(+{m['runq_wait_cores']:.2f} waiting)  server cores "
                  f"{m['child_cpu_cores']:.2f}  member p50 ms "
                  + " ".join(f"{k}={v:.3f}" for k, v in m["member_p50_ms"].items()))
        for mode, text in s["verdict"].items():
            print(f"    {mode}: {text}")
        q = s["quality"]
        if q.get("available"):
            print("    nDCG@10: " + ", ".join(f"{r['ranking']} {r['ndcg@10']:.4f}"
                                             for r in q["rows"] if r["ndcg@10"] > 0))
    print("\nsummary (speedup = serial p50 / mode p50, same run):")
    goals = {"hnswlib": 1.7, "faiss-hnsw": 1.7, "milvus-servers": 2.0}
    for label, s in results.items():
        sp = s["speedup"]
        goal = goals.get(label)
        verdict = "" if goal is None else (
            f" goal >= {goal}x: {'MET' if max(sp.values()) >= goal else 'NOT MET'}")
        print(f"  {label:14s} threads {sp.get('threads') or 0:.2f}x  asyncio "
              f"{sp.get('asyncio') or 0:.2f}x{verdict}")


if __name__ == "__main__":
    main()
