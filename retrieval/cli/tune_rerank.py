"""`rwb tune rerank SPEC`: rerank depth (quality vs latency) and the BM25 fallback threshold."""

from __future__ import annotations

import argparse
from typing import Any

from retrieval.cli._adaptive import print_adaptive
from retrieval.cli._common import close_bar, fmt, print_json, print_table, progress_bar


def register(tune_sub: argparse._SubParsersAction) -> None:
    p = tune_sub.add_parser(
        "rerank",
        help="sweep rerank depths: nDCG@10/recall vs per-query latency; BM25 fallback router",
    )
    p.add_argument("spec", help="rerank spec YAML (e.g. sweeps/scifact-rerank.yaml)")
    p.add_argument("--out", help="run directory (default runs/<id>; refused if non-empty)")
    p.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--max-queries", type=int, help="override: seeded subset of the queries")
    p.add_argument("--sample-queries", type=int,
                   help="override: queries whose rerank calls are timed at every depth")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.api import tune_rerank

    bar, progress = progress_bar("tune rerank", width=40)
    try:
        result = tune_rerank(args.spec, out=args.out, max_queries=args.max_queries,
                             sample_queries=args.sample_queries, progress=progress,
                             force=args.force)
    finally:
        close_bar(bar)
    if args.json:
        print_json(result.to_dict())
        return 0
    print_summary(result.to_dict())
    return 0


def print_summary(s: dict[str, Any]) -> None:
    """The human-readable report of a rerank sweep summary."""
    print(f"{s['dataset']}: {s['n_docs']} docs, {s['n_queries']} queries "
          f"({s['n_tuning']} tuning / {s['n_heldout']} held-out)")
    if s.get("dataset_path"):
        print(f"data: {s['dataset_path']} (split {s.get('dataset_split')}); {s['relevance']}")
    fs = s["first_stage"]
    print(f"first stage nDCG@10: dense {fmt(s['dense_ndcg@10'])}  "
          f"bm25 {fmt(s['bm25_ndcg@10'])} ({s['bm25']['implementation']})  "
          f"p50 ms dense {fmt(fs['dense']['latency']['p50_ms'])} "
          f"bm25 {fmt(fs['bm25']['latency']['p50_ms'])}")
    metric = s["selection_metric"]
    recall = next(k for k in s["curve"][0]["all"] if k.startswith("recall@"))
    rows = [
        (c["depth"], c["tuning"][metric], c["heldout"][metric], c["all"][recall],
         c["latency"]["p50_ms"], c["latency"]["p95_ms"])
        for c in s["curve"]
    ]
    print(f"rerank {s['reranker']['name']} over {s['sweep_first_stage']} "
          f"(latency: whole stage, {s['latency_sample_queries']} sampled queries)")
    print_table(rows, ["depth", f"tune {metric}", f"held {metric}", f"all {recall}",
                       "p50_ms", "p95_ms"])
    verdict = "no rerank wins" if s["no_rerank_wins"] else f"rerank top {s['chosen_depth']}"
    print(f"chosen depth: {s['chosen_depth']} ({verdict}; smallest within "
          f"{s['tolerance']} of the best, depth {s['best_depth']}, on the tuning split)")
    r = s.get("router")
    if r:
        h = r["heldout"]
        print(f"BM25 fallback: threshold {fmt(r['threshold'])} ({r['policy']}; "
              f"{r['threshold_unit']}); held-out {metric} {fmt(h['chosen']['quality'])} "
              f"vs never {fmt(h['never']['quality'])} / always {fmt(h['always']['quality'])}; "
              f"mean ms {fmt(h['chosen']['mean_ms'])} vs never {fmt(h['never']['mean_ms'])}; "
              f"routed {fmt(h['chosen']['routed_share'])}")
    print_adaptive(s.get("adaptive"))
    print_quality(s.get("quality"))
    runs = s.get("trec_runs") or {}
    if runs:
        print("TREC runs: " + ", ".join(f"{role} {name}" for role, name in runs.items()))
    print(f"run directory: {s['run_dir']}")


def print_quality(q: dict[str, Any] | None) -> None:
    """The quality target's pair beside the recall-0.95 choice (``target:`` in the spec)."""
    if not q:
        return
    print(f"quality target: {q['metric']} non-inferior to {q['reference']} (margin "
          f"{q['margin']}, alpha {q['alpha']}, {q['n_queries']} tuning queries; exact "
          f"{fmt(q['exact'])})")
    rows = []
    for role, r in (("quality", q.get("quality")), ("recall", q.get("recall"))):
        if r:
            rows.append((role, r["knob_value"], r["depth"], r.get("value"),
                         r.get("lower_bound"), r.get("cost_ms"), r.get("distance_computations")))
    print_table(rows, ["choice", q["knob"], "depth", q["metric"], "lower bound", "cost ms",
                       "distances"])
    print(f"pair by quality ({q['knob']}={q['knob_quality']}, depth {q['depth_quality']}) vs "
          f"recall-{q['recall_target']} ({q['knob']}={q['knob_recall']}, depth "
          f"{q['depth_recall']}): {'agree' if q['agree'] else 'disagree'}; cost: "
          f"{q['cost_unit']}")
