"""`rwb profile SPEC --out DIR`: the retrieval pipeline as one request - per-stage P50/P95/P99,
shares of the end-to-end P95/P99, tail attribution, quality; OTLP traces (--otlp-dir, or
$OTEL_EXPORTER_OTLP_ENDPOINT); the measured remedy waterfall (--remedies); production traces
next to rwb's stages (--compare)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from retrieval.cli._common import fmt, print_json, print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile", help="profile a retrieval pipeline per stage (traces, tail, remedies)",
        description="Run logged queries through a pipeline spec (embed, cache, collections, "
        "fusion, rerank, BM25 fallback) one request at a time; print per-stage percentiles, "
        "their shares of the end-to-end P95/P99, which stage made the slowest 1%% slow, and "
        "quality. See sweeps/pipeline-example.yaml.")
    p.add_argument("spec", help="pipeline spec YAML")
    p.add_argument("--out", required=True, help="run directory (new or empty)")
    p.add_argument("--queries", help="logged queries: .jsonl ({id, text} per line) or text, "
                   "one per line (default: the spec's queries)")
    p.add_argument("--otlp-dir", help="write OTLP JSON lines (traces.jsonl) here")
    p.add_argument("--remedies", action="store_true",
                   help="measure the remedies of the spec, cumulatively (the waterfall)")
    p.add_argument("--compare", metavar="TRACES",
                   help="OTLP JSON traces from production (file or folder): P95/P99 per stage "
                   "next to rwb's")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}"


def _pc(v: Any) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def run(args: argparse.Namespace) -> int:
    from retrieval.api import profile

    res = profile(args.spec, out=args.out, queries=args.queries, otlp_dir=args.otlp_dir,
                  remedies=args.remedies, compare=args.compare, force=args.force,
                  progress=None if args.json else
                  (lambda s: print(f"... {s}", file=sys.stderr)))
    if args.json:
        print_json(res.to_dict())
        return 0
    s = res.summary
    print(f"pipeline {s['name']}: "
          f"{s['stages'][-1]['n']} requests one at a time ({s['mode']}), run: {res.path}")
    print_table([[r["name"], r["n"], _ms(r["p50_ms"]), _ms(r["p95_ms"]), _ms(r["p99_ms"]),
                  _pc((r.get("shares") or {}).get("p95")), _pc((r.get("shares") or {}).get("p99")),
                  _pc(r.get("critical"))] for r in s["stages"]],
                ["stage", "n", "p50 ms", "p95 ms", "p99 ms", "share p95", "share p99",
                 "slowest child"])
    tail = s["tail"]
    culprits = ", ".join(f"{k} {v}" for k, v in tail["by_stage"].items())
    print(f"slowest {tail['n']} request(s) (1%): made slow by {culprits or '-'}")
    for e in s.get("exemplars", []):
        print(f"  p99 exemplar: query {e['query_id']} {e['ms']:.1f} ms"
              + (f" trace {e['trace_id']}" if e.get("trace_id") else ""))
    if s.get("quality"):
        q = s["quality"]
        print("quality: " + ", ".join(f"{k} {fmt(v)}" for k, v in q.items()))
    if s.get("cache"):
        c = s["cache"]
        print(f"cache: hit rate {_pc(c['hit_rate'])}, false hits {_pc(c['false_hit_rate'])}")
    for pt in s.get("load") or []:
        print(f"open loop {pt['rate_qps']:g} q/s: p50 {_ms(pt['p50_ms'])} p95 "
              f"{_ms(pt['p95_ms'])} p99 {_ms(pt['p99_ms'])} ms (corrected; uncorrected p99 "
              f"{_ms(pt['p99_ms_uncorrected'])})")
    if s.get("otlp_files"):
        print("traces: " + ", ".join(s["otlp_files"]))
    rem = s.get("remedies")
    if rem:
        qk = rem.get("quality_key")
        print("remedies (cumulative, each measured):")
        print_table([[r["step"], "yes" if r["applied"] else "no", _ms(r.get("p50_ms")),
                      _ms(r.get("p95_ms")), _ms(r.get("p99_ms")), _gain(r),
                      fmt(r.get(qk)) if qk else "-", fmt(r.get("roi")), r["what"]]
                     for r in rem["steps"]],
                    ["step", "applied", "p50 ms", "p95 ms", "p99 ms", "p95 gain ms",
                     qk or "quality", "roi (ms/quality)", "what"])
        print(f"best return per quality lost: {rem.get('best') or '-'}")
    if res.compare is not None:
        print(f"production ({res.compare['traces']} traces) vs rwb, per stage:")
        print_table([[r["name"], r["n_prod"], _ms(r["prod_p95_ms"]), _ms(r["lab_p95_ms"]),
                      _ms(r.get("gap_p95_ms")), _ms(r["prod_p99_ms"]), _ms(r["lab_p99_ms"]),
                      _ms(r.get("gap_p99_ms"))] for r in res.compare["stages"]],
                    ["stage", "n prod", "prod p95", "rwb p95", "gap", "prod p99", "rwb p99",
                     "gap"])
        print("a positive gap: production spends that time outside the stage itself "
              "(queueing, network, gateway)")
    return 0


def _gain(row: dict[str, Any]) -> str:
    """The credited P95 gain (ms): "none (noise)" inside the noise band, "(stage)" when capped
    at the time of the stage the remedy acts on."""
    if row.get("p95_saved_ms") is None:
        return "-"
    if row.get("within_noise"):
        return "none (noise)"
    return _ms(row["p95_saved_ms"]) + (" (stage)" if "capped_at_stage_ms" in row else "")
