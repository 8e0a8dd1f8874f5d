"""The rerank sweep's quality pass and router with the query vectors read from the dense stage's
one batch embedding (since issue 34) vs each query re-encoded alone (the baseline, the code as it
was): the same Cranfield sweep, interleaved in rounds after one warm-up run (model load, ranx
compile, corpus embedded). Prints seconds per sweep, the after / before ratio (goal < 1: cheaper)
and whether the quality curve (nDCG@10, recall@100, MRR@10 per depth) is identical, with the CPU
model and the load average. Printed, never asserted: speed is not a test.

Usage: python benchmarks/rerank_quality_pass.py [--queries 24] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import retrieval.rerank.run as rr
    from retrieval.rerank.spec import parse_rerank_spec

    spec = {"dataset": "cranfield", "name": "bench-rerank-pass", "max_queries": args.queries,
            "depths": [5, 10], "latency": {"sample_queries": 1, "warmup": 0},
            "router": {"quantiles": 4}}
    after = rr.build_rerankers

    def before(spec: Any, embedder: Any, corpus: Any, dense: Any, reranker: Any = None,
               queries: Any = ()) -> Any:
        return after(spec, embedder, corpus, dense, reranker)  # queries re-encoded one by one

    tmp = Path(tempfile.mkdtemp(prefix="rwb-bench-rr-"))

    def once() -> tuple[float, Any]:
        t0 = time.perf_counter()
        res = rr.run_rerank_sweep(parse_rerank_spec(spec, source="bench"),
                                  tmp / f"run-{time.time_ns()}")
        quality = [{k: c.get(k) for k in ("depth", "tuning", "heldout")}
                   for c in res.summary["curve"]]
        return time.perf_counter() - t0, quality

    once()  # warm-up
    secs: dict[str, list[float]] = {"before": [], "after": []}
    curves: dict[str, Any] = {}
    for _ in range(args.rounds):
        for tag, fn in (("before", before), ("after", after)):
            rr.build_rerankers = fn
            s, curves[tag] = once()
            secs[tag].append(s)
    rr.build_rerankers = after
    b, a = statistics.median(secs["before"]), statistics.median(secs["after"])
    info = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in info
                if line.startswith("model name")), "unknown")
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"cpu: {cpu}; load average: {load}")
    print(f"rerank sweep, Cranfield, {args.queries} queries: before {b:.2f} s, after {a:.2f} s "
          f"(median of {args.rounds}); ratio after/before {a / b:.2f} (goal < 1)")
    print(f"quality curve identical: {curves['before'] == curves['after']}")


if __name__ == "__main__":
    main()
