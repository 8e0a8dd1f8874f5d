"""`rwb sweep SPEC` for a ``kind: rag-study`` spec (dispatched from retrieval/cli/cmd_sweep.py):
runs the cross-layer study and prints its Pareto set, the choice and the significance test."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from retrieval.cli._common import print_json, print_table


def run_study_cmd(args: argparse.Namespace) -> int:
    from retrieval.api import sweep

    verbose = sys.stderr.isatty()  # stderr only: --json keeps stdout clean

    def progress(done: int, total: int, msg: str) -> None:
        if verbose:
            print(f"rwb sweep: {msg}", file=sys.stderr)

    run = sweep(args.spec, out=args.out, strategy=args.strategy,
                target_recall=args.target_recall, storage=args.storage, study=args.study,
                n_trials=args.n_trials, threads=args.threads, build_threads=args.build_threads,
                progress=progress, force=args.force)
    if args.json:
        print_json(run.to_dict())
        return 0
    print_result(run.to_dict(), str(run.path))
    return 0


def print_result(s: dict[str, Any], run_dir: str) -> None:
    knob = next(k for k in s["knobs"] if k not in ("depth", "threshold", "threshold_unit"))
    c = s["constraints"]
    print(f"{s['name']}: {knob} x rerank depth x cache threshold; objectives nDCG@10 (max), "
          f"p95 ms (min), USD per 1,000 queries (min); recall target {c['target_recall']}, "
          f"false-hit cap {c['max_false_hit']}")
    rows = [(p[knob], p["depth"], p["threshold"], p["tuning"]["ndcg_e2e"],
             p["tuning"]["recall_lb"], p["tuning"]["hit_rate"],
             p["tuning"]["false_hit_upper_bound"], p["tuning"]["p95_ms"],
             p["tuning"]["usd_per_1k"]) for p in s["pareto_set"]]
    print(f"Pareto set ({len(rows)} of {s['optuna']['trials']} trials, tuning split):")
    print_table(rows, [knob, "depth", "threshold", "ndcg_e2e", "recall_lb", "hit_rate",
                       "fh_upper", "p95_ms", "usd_1k"])
    comp = []
    for name in ("default", "chosen"):
        x = s.get(name)
        if x:
            h = x["heldout"]
            comp.append((name, x[knob], x["depth"], x["threshold"], h["ndcg_e2e"], h["recall"],
                         h["hit_rate"], h["false_hit_rate"], h["p95_ms"], h["usd_per_1k"]))
    print("held-out:")
    print_table(comp, ["config", knob, "depth", "threshold", "ndcg_e2e", "recall", "hit_rate",
                       "false_hit", "p95_ms", "usd_1k"])
    sig = s.get("significance")
    if sig:
        verdict = "significant" if sig["significant"] else "not significant"
        p_text = sig["p_value_text"]
        p_text = p_text if p_text.startswith("<") else f"= {p_text}"
        print(f"{sig['test_name']} (ranx) on {sig['n_queries']} held-out queries, retrieval-path "
              f"{sig['metric']}: {sig['default']:.4f} -> {sig['chosen']:.4f}, p {p_text} "
              f"({verdict} at {sig['alpha']})")
    elif s.get("chosen") is None:
        print("no feasible config: nothing meets the recall target and the false-hit cap")
    print(f"run directory: {run_dir}  (rwb report {run_dir})")
