"""``rwb tune cache SPEC``: tune a semantic-cache threshold on QQP against a live Redis.

Discovered by the ``tune`` command group (``retrieval/cli/cmd_tune.py``), which calls
``register(subparsers)`` of every ``retrieval/cli/tune_*.py`` module.
"""

from __future__ import annotations

import argparse
from typing import Any

from retrieval.cli._adaptive import print_adaptive
from retrieval.cli._common import fmt, print_json, print_table


def register(sub: Any) -> None:
    p = sub.add_parser(
        "cache",
        help="tune a semantic-cache threshold (false-hit cap, confidence bound) on live Redis",
        description=(
            "Fill a Redis semantic cache (redisvl SemanticCache) with GPTCache's Quora questions, "
            "probe it with the other side of each labelled pair, and choose the largest "
            "cosine-distance threshold whose upper confidence bound on the tuning false-hit rate "
            "is <= the cap; report it on the held-out split. Redis: --redis-url, else $REDIS_URL, "
            "else a private server started from the PyPI wheels."
        ),
    )
    p.add_argument("spec", help="cache tuning spec (YAML), e.g. sweeps/qqp-cache.yaml")
    p.add_argument("--max-false-hit", type=float, default=None,
                   help="cap on false hits per lookup (overrides tuning.max_false_hit)")
    p.add_argument("--confidence", type=float, default=None,
                   help="one-sided level of the upper bound (overrides tuning.confidence)")
    p.add_argument("--bound", choices=("wilson", "clopper_pearson"), default=None)
    p.add_argument("--out", default=None,
                   help="run directory (default runs/<id>; refused if non-empty)")
    p.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    p.add_argument("--redis-url", default=None, help="Redis 8 / Redis Stack URL")
    p.add_argument("--keep-index", action="store_true", help="leave the filled index in Redis")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.api import tune_cache

    result = tune_cache(args.spec, out=args.out, redis_url=args.redis_url,
                        max_false_hit=args.max_false_hit, confidence=args.confidence,
                        bound=args.bound, keep_index=args.keep_index, force=args.force)
    s = result.to_dict()
    if args.json:
        print_json(s)
    else:
        _print(s)
    return 0 if s["feasible"] else 1


def _print(s: dict[str, Any]) -> None:
    data = s.get("dataset") or {}
    files = [f"{k} {v['path']}" for k in ("pairs", "heldout") if (v := data.get(k))]
    print(f"data: {data.get('name')}" + (f" ({', '.join(files)})" if files else ""))
    if s["threshold"] is None:
        print(f"no threshold meets the cap: {s['reason']}")
    else:
        eq = s["threshold_equivalents"]
        print(f"threshold {s['threshold']:.4f} cosine_distance (redisvl distance_threshold); "
              f"= cosine similarity {eq['cosine_similarity']:.4f}, GPTCache "
              f"similarity_threshold {fmt(eq['gptcache.similarity_threshold'])}")
        print(f"target: false hits <= {s['max_false_hit']} per lookup, {s['bound']} upper bound "
              f"at {s['confidence']} (tuning bound {s['false_hit_upper_bound']:.4f})")
        rows = [[split, m["probes"], m["hit_rate"], m["correct_hit_rate"], m["false_hit_rate"],
                 m["false_hit_upper_bound"], m["precision"], m["duplicate_recall"]]
                for split, m in (("tuning", s["tuning"]), ("heldout", s["heldout"]))]
        print_table(rows, ["split", "probes", "hit_rate", "correct", "false_hit",
                           "false_ub", "precision", "dup_recall"])
        live = s.get("live_lookup_agreement")
        if live:
            print(f"live {live['lookup']} lookups (EPSILON {live['epsilon']}) agree with KNN + "
                  f"threshold on {live['agreement']:.3f} of {live['sample']} held-out probes "
                  f"({live['missed_hits']} of {live['knn_hits']} KNN hits missed)")
    print()
    curve = [r for r in s["curve"] if abs(r["threshold"] * 20 - round(r["threshold"] * 20))
             < 1e-9 and r["threshold"] <= 0.5]
    print_table([[r["threshold"], r["split"], r["hit_rate"], r["false_hit_rate"],
                  r["precision"], r["false_hit_upper_bound"]] for r in curve],
                ["threshold", "split", "hit_rate", "false_hit", "precision", "false_ub"])
    print()
    lat = [[size, v.get("p50_ms"), v.get("p99_ms"), v.get("skipped", "")]
           for size, v in s["latency_ms"].items()]
    print_table(lat, ["entries", "p50_ms", "p99_ms", "note"])
    c, t = s["cost"], s["timing_s"]
    if "usd_saved_per_1k_queries" in c:
        print(f"\nsaved per 1,000 queries: ${c['usd_saved_per_1k_queries']:.4f} "
              f"({c['llm_calls_avoided_per_1k_queries']:.0f} LLM calls at "
              f"${c['usd_per_llm_call']:.6f}; {c['wrong_answers_served_per_1k_queries']:.1f} "
              f"wrong answers served)")
    print(f"time: embed {t['embed_s']:.1f} s, cache fill {t['fill_s']:.1f} s, tuning "
          f"{t['tuning_s']:.1f} s (KNN fetch {t['knn_fetch_s']:.1f} s + sweep "
          f"{t['sweep_s']:.2f} s)")
    for t in s.get("transfer") or []:
        print(f"transfer check: {t['verdict']}")
    print_adaptive(s.get("adaptive"))
    if s.get("run_dir"):
        print(f"run: {s['run_dir']}")
