"""`rwb profile` benchmark: a three-collection pipeline on rwb's text data (SciFact / Reuters /
QQP, MiniLM queries, the tiny cross-encoder for rerank latency, BM25 fallback, the real Redis
cache when REDIS_URL is set): the measured waterfall serial -> parallel -> tuned knobs -> rerank
depth -> cache -> BM25 fallback with end-to-end P95 after each step; and the tracing overhead,
on (OTLP JSON file) vs off, as a share of P50 (goal <= 3%). Prints the load average and CPU.

Full size: ``python benchmarks/pipeline_profile.py``; a quick check: ``--small``. Run it on an
otherwise idle machine; the figures are ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def spec(small: bool) -> dict:
    n_doc = 200 if small else 20000
    return {
        "name": "bench-pipeline", "k": 10, "warmup": 3 if small else 20,
        "queries": {"source": "scifact", "n": 12 if small else 300},
        "retrieval": {"mode": "serial", "timeout_s": 5.0, "collections": [
            {"name": "scifact", "source": "scifact", "sample": None if not small else n_doc,
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="a quick check, not the figures")
    args = ap.parse_args()
    from retrieval.profiling import parse_profile_spec
    from retrieval.profiling.run import run_profile

    s = parse_profile_spec(spec(args.small), source="<benchmark>")
    print(f"cpu: {platform.processor() or platform.machine()}, cores {os.cpu_count()}, "
          f"load average before: {os.getloadavg()}")
    res = run_profile(s, remedies=True)
    print("waterfall (cumulative, each measured):")
    for r in res.summary["remedies"]["steps"]:
        if r["applied"]:
            print(f"  {r['step']:<26} p50 {r['p50_ms']:8.1f}  p95 {r['p95_ms']:8.1f}  p99 "
                  f"{r['p99_ms']:8.1f} ms  nDCG@10 {r.get('ndcg@10')}")
        else:
            print(f"  {r['step']:<26} skipped: {r['what']}")
    # tracing overhead: the same pipeline, one pass untraced, one traced (file exporter)
    off = res.summary["end_to_end"]["p50_ms"]
    with tempfile.TemporaryDirectory() as d:
        on = run_profile(s, otlp_dir=Path(d) / "otlp").summary["end_to_end"]["p50_ms"]
        off2 = run_profile(s).summary["end_to_end"]["p50_ms"]
    base = min(off, off2)
    print(f"tracing: p50 off {off:.2f} / {off2:.2f} ms, on {on:.2f} ms: overhead "
          f"{100 * (on - base) / base:+.1f}% of p50 (goal <= 3%)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
