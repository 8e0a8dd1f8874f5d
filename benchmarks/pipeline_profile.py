"""`rwb profile` benchmark: a three-collection pipeline on rwb's text data (SciFact / Reuters /
QQP, MiniLM queries, the tiny cross-encoder for rerank latency, BM25 fallback, the real Redis
cache when REDIS_URL is set): the measured waterfall serial -> parallel -> tuned knobs -> rerank
depth -> cache -> BM25 fallback with end-to-end P95 after each step; and the tracing overhead,
on (OTLP JSON file) vs off, as a share of P50 (goal <= 3%). Prints the load average and CPU.

Full size: ``python benchmarks/pipeline_profile.py`` (20k documents per collection, 300 queries:
the embedding of the collections alone takes tens of minutes on 2 cores); a medium size:
``--docs 3000 --queries 100``; a quick check: ``--small``. Run it on an otherwise idle machine.

Tracing overhead is measured on ONE built pipeline, passes alternating off / on (``--rounds``
each), so that builds, caches and machine drift fall on both sides alike: the median P50 of each
side, and the direct figure, each request's ``overhead`` (end to end minus its stages, where the
span creation falls) traced minus untraced, as a share of the untraced P50.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def spec(small: bool, docs: int | None = None, queries: int | None = None) -> dict:
    n_doc = docs or (200 if small else 20000)
    return {
        "name": "bench-pipeline", "k": 10, "warmup": 3 if small else 20,
        "queries": {"source": "scifact", "n": queries or (12 if small else 300)},
        "retrieval": {"mode": "serial", "timeout_s": 5.0, "collections": [
            {"name": "scifact", "source": "scifact",
             "sample": n_doc if (small or docs) else None,
             "backend": "hnswlib", "build": {"M": 16, "ef_construction": 200},
             "search": {"ef_search": 256}},
            {"name": "reuters", "source": "reuters", "sample": n_doc, "backend": "faiss-hnsw",
             "build": {"M": 16, "ef_construction": 200}, "search": {"ef_search": 256}},
            {"name": "qqp", "source": "qqp", "sample": n_doc, "backend": "hnswlib",
             "build": {"M": 16, "ef_construction": 200}, "search": {"ef_search": 256}},
        ]},
        "rerank": {"model": "tiny", "depth": 100},
        "remedies": {"parallel": True,
                     "knobs": {c: {"search": {"ef_search": 128}}
                               for c in ("scifact", "reuters", "qqp")},
                     "rerank_depth": 30, "cache_threshold": 0.1,
                     "bm25_fallback": {"collection": "scifact"}, "fallback_timeout_s": 0.2},
    }


def tracing_overhead(s, rounds: int) -> None:  # type: ignore[no-untyped-def]
    """Alternate untraced / traced passes on one built pipeline; print both P50s and the
    direct per-request cost of making the spans."""
    import statistics

    from retrieval.profiling.pipeline import build_pipeline, load_queries
    from retrieval.profiling.run import one_at_a_time
    from retrieval.profiling.stats import percentiles
    from retrieval.profiling.trace import start_tracing

    qs = load_queries(s, None)
    with tempfile.TemporaryDirectory() as d:
        tracing = start_tracing(Path(d) / "otlp", service="rwb-bench", run_name=s.name,
                                endpoint=False)
        assert tracing is not None
        try:
            with build_pipeline(s, Path(d) / "work", tracing) as built:
                pipe = built.pipeline
                p50 = {"off": [], "on": []}
                extra = {"off": [], "on": []}
                for r in range(rounds):
                    for side in ("off", "on") if r % 2 == 0 else ("on", "off"):
                        pipe.tracing = tracing if side == "on" else None
                        recs = one_at_a_time(pipe, qs, s.warmup)
                        p50[side].append(percentiles([x.ms for x in recs])["p50_ms"])
                        extra[side].append(statistics.median(x.overhead_ms() for x in recs))
        finally:
            tracing.close()
    off, on = statistics.median(p50["off"]), statistics.median(p50["on"])
    cost = statistics.median(extra["on"]) - statistics.median(extra["off"])
    print(f"tracing, {rounds} alternating passes each of {len(qs.queries)} requests: p50 off "
          f"{off:.2f} ms (passes {', '.join(f'{v:.2f}' for v in p50['off'])}), on {on:.2f} ms "
          f"({', '.join(f'{v:.2f}' for v in p50['on'])}): {100 * (on - off) / off:+.1f}% of p50")
    print(f"tracing, direct: span creation adds {1000 * cost:.1f} us per request = "
          f"{100 * cost / off:.2f}% of the untraced p50 (goal <= 3%)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="a quick check, not the figures")
    ap.add_argument("--docs", type=int, help="documents per collection (default 20000)")
    ap.add_argument("--queries", type=int, help="SciFact queries (default 300)")
    ap.add_argument("--rounds", type=int, default=4, help="tracing passes per side")
    args = ap.parse_args()
    from retrieval.profiling import parse_profile_spec
    from retrieval.profiling.run import run_profile

    s = parse_profile_spec(spec(args.small, args.docs, args.queries), source="<benchmark>")
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    print(f"cpu: {cpu}, cores {os.cpu_count()}, "
          f"load average before: {os.getloadavg()}")
    res = run_profile(s, remedies=True)
    print("waterfall (cumulative, each measured):")
    for r in res.summary["remedies"]["steps"]:
        if r["applied"]:
            print(f"  {r['step']:<26} p50 {r['p50_ms']:8.1f}  p95 {r['p95_ms']:8.1f}  p99 "
                  f"{r['p99_ms']:8.1f} ms  nDCG@10 {r.get('ndcg@10')}")
        else:
            print(f"  {r['step']:<26} skipped: {r['what']}")
    tracing_overhead(s, args.rounds)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
