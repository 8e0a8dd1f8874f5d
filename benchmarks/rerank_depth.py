"""Rerank-depth choice vs the fixed depth 100 that BEIR uses (issue 5, Performance).

Runs the SciFact rerank sweep (sweeps/scifact-rerank.yaml: BM25 first stage, MiniLM bi-encoder
reranker) and prints, in one run:
- held-out nDCG@10 at the chosen depth and at depth 100 (equal quality within the tolerance?);
- whole-stage single-query latency p50/p95 (ms) at both depths, measured by actual calls on the
  same sampled queries, and the ratio latency(100) / latency(chosen)        goal > 1 at equal
  quality.
Then, with a tiny randomly initialised cross-encoder (plumbing only: random weights, meaningless
scores), how a CrossEncoder call scales with depth: ms(100) / ms(10).
Printed, never asserted: speed is not a test.

Usage: python benchmarks/rerank_depth.py [--spec sweeps/scifact-rerank.yaml] [--sample 20]
       [--out DIR]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path


def depth_choice(spec_path: str, sample: int | None, out: str | None) -> None:
    from retrieval.rerank.run import run_rerank_sweep
    from retrieval.rerank.spec import load_rerank_spec, parse_rerank_spec

    spec = load_rerank_spec(spec_path)
    if sample is not None:
        data = spec.model_dump(mode="json", exclude_unset=True)
        data["latency"] = {**data.get("latency", {}), "sample_queries": sample}
        spec = parse_rerank_spec(data, source=spec_path)
    if 100 not in spec.depths:
        raise SystemExit(f"{spec_path}: depths must include 100 (the BEIR depth)")
    out_dir = out or tempfile.mkdtemp(prefix="rwb-bench-rerank-")
    s = run_rerank_sweep(spec, out_dir, spec_source=spec_path).summary
    curve = {c["depth"]: c for c in s["curve"]}
    chosen, beir = curve[s["chosen_depth"]], curve[100]
    m = s["selection_metric"]
    print(f"{s['dataset']}: {s['n_queries']} queries ({s['n_heldout']} held-out); "
          f"first stage {s['sweep_first_stage']}, reranker {s['reranker']['name']}")
    print(f"first stage nDCG@10: dense {s['dense_ndcg@10']:.4f}  bm25 {s['bm25_ndcg@10']:.4f}")
    print(f"chosen depth {s['chosen_depth']} (tolerance {s['tolerance']}, best depth "
          f"{s['best_depth']}){'  -> no rerank wins' if s['no_rerank_wins'] else ''}")
    print(f"held-out {m}: chosen {chosen['heldout'][m]:.4f}  depth 100 {beir['heldout'][m]:.4f}"
          f"  (diff {chosen['heldout'][m] - beir['heldout'][m]:+.4f})")
    lc, lb = chosen["latency"], beir["latency"]
    print(f"stage latency p50 ms: chosen {lc['p50_ms']:.1f}  depth 100 {lb['p50_ms']:.1f}  "
          f"| p95: {lc['p95_ms']:.1f} vs {lb['p95_ms']:.1f}  "
          f"({s['latency_sample_queries']} sampled queries)")
    print(f"RATIO latency(100)/latency(chosen) p50 = {lb['p50_ms'] / lc['p50_ms']:.2f}x, "
          f"p95 = {lb['p95_ms'] / lc['p95_ms']:.2f}x")
    r = s.get("router")
    if r:
        h = r["heldout"]
        print(f"BM25 fallback threshold {r['threshold']} ({r['policy']}): held-out {m} "
              f"{h['chosen']['quality']:.4f} vs never {h['never']['quality']:.4f}; mean ms "
              f"{h['chosen']['mean_ms']:.1f} vs never {h['never']['mean_ms']:.1f}")
    print(f"run directory: {s['run_dir']}")


def cross_encoder_scaling(rounds: int = 3) -> None:
    from retrieval.rerank.rerankers import CrossEncoderReranker, score_passages
    from retrieval.testing.tiny_reranker import make_tiny_cross_encoder

    folder = make_tiny_cross_encoder(Path(tempfile.mkdtemp(prefix="rwb-tiny-ce-")))
    ce = CrossEncoderReranker(folder, batch_size=32)
    passages = [f"passage {i}: " + "aerodynamic boundary layer flow " * 30 for i in range(100)]
    score_passages(ce, "warm up", passages[:32])
    ms = {}
    for d in (10, 50, 100):
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            score_passages(ce, "boundary layer transition", passages[:d])
            times.append((time.perf_counter_ns() - t0) / 1e6)
        ms[d] = statistics.median(times)
    print("tiny random cross-encoder (plumbing; random weights), one call per depth, median ms: "
          + "  ".join(f"depth {d}: {v:.1f}" for d, v in ms.items()))
    print(f"RATIO ms(100)/ms(10) = {ms[100] / ms[10]:.2f}x (linear scaling would be 10x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="sweeps/scifact-rerank.yaml")
    ap.add_argument("--sample", type=int, help="override latency.sample_queries")
    ap.add_argument("--out", help="run directory (default: a temp folder)")
    ap.add_argument("--skip-cross-encoder", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    depth_choice(args.spec, args.sample, args.out)
    if not args.skip_cross_encoder:
        cross_encoder_scaling()


if __name__ == "__main__":
    main()
