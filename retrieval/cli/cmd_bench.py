"""`rwb bench embed`: batched vs one-at-a-time embedding; `rwb bench fanout SPEC`: querying
several collections serially, with threads and with asyncio, fused; `rwb bench load SPEC`:
latency under closed- and open-loop load and the capacity at a p99 SLO. Each writes a run
directory and prints a table (or JSON)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from retrieval.cli._common import fmt, print_json, print_table, progress_bar
from retrieval.errors import ConfigError


def _int_list(flag: str, text: str | None) -> list[int] | None:
    """``"1,8,32"`` -> [1, 8, 32]; ConfigError (one line, exit 2) for anything else."""
    if text is None:
        return None
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values:
        raise ConfigError(
            f"bench embed: {flag} must be comma-separated integers (e.g. 1,8,32); "
            f"received {text!r}"
        )
    return values


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks: embedding batching, multi-collection fan-out")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    e = bsub.add_parser(
        "embed", help="one-at-a-time vs batched embedding (texts/s, latency, padding, bf16)",
        description="Embed real text one at a time and in batches (plain, length-sorted, "
        "token-budget), check that batched and single embeddings agree, and measure bf16 "
        "where the CPU supports it.",
    )
    e.add_argument("--config", help="embed bench config YAML (flags override it)")
    e.add_argument("--collection", help="qqp | reuters | scifact | cranfield | mixed (default qqp)")
    e.add_argument("--texts-file", help="UTF-8 file with one text per line (instead of a "
                   "collection)")
    e.add_argument("--sample", type=int, help="texts to embed (default 4000)")
    e.add_argument("--seed", type=int, help="sampling seed")
    e.add_argument("--batch-sizes", help="comma-separated, e.g. 1,8,32,128")
    e.add_argument("--token-budgets",
                   help="padded tokens per batch, comma-separated (e.g. 4096,16384)")
    e.add_argument("--no-sorted", action="store_true", help="skip the length-sorted settings")
    e.add_argument("--dtypes", help="fp32 or fp32,bf16")
    e.add_argument("--model", help="local model folder (default: packaged all-MiniLM-L6-v2)")
    e.add_argument("--engine", help="sentence-transformers | flagembedding")
    e.add_argument("--runtimes", help="comma-separated: torch, torch-bf16, onnx, onnx-int8, "
                   "openvino (torch fp32 is always measured: the reference)")
    e.add_argument("--quality", help="none | scifact: also retrieve on SciFact per runtime "
                   "(nDCG@10, recall@10 vs fp32)")
    e.add_argument("--single-limit", type=int, help="one-at-a-time calls on at most N texts")
    e.add_argument("--threads", type=int, help="torch threads")
    e.add_argument("--json", action="store_true", help="print summary.json")
    e.add_argument("--out", help="run directory (default runs/<id>; refused if non-empty)")
    e.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    e.set_defaults(func=run_embed)

    f = bsub.add_parser(
        "fanout", help="several collections queried serially / threads / asyncio, fused",
        description="Build one index per collection of SPEC, answer the queries in each mode, "
        "report per-query latency, speedup over serial, CPU accounting and fused quality.",
    )
    f.add_argument("spec", help="fan-out spec YAML (e.g. sweeps/fanout-3-collections.yaml)")
    f.add_argument("--backend", help="put every collection on this backend (default params)")
    f.add_argument("--server", action="store_true",
                   help="a private server process of the backend's engine, by URI "
                        "(engines with one)")
    f.add_argument("--servers", choices=["shared", "per-collection"],
                   help="server collections share one server process or get one each")
    f.add_argument("--queries", type=int, help="override the number of queries")
    f.add_argument("--rounds", type=int,
                   help="repeat all modes N times, interleaved; speedup = median over rounds")
    f.add_argument("--json", action="store_true", help="print summary.json")
    f.add_argument("--out", help="run directory (default runs/<id>; refused if non-empty)")
    f.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    f.set_defaults(func=run_fanout)
    _register_load(bsub)
    _register_churn(bsub)


def _bar(desc: str) -> tuple[Any, Callable[[int, int, str], None] | None]:
    return progress_bar(desc, width=40)


# --------------------------------------------------------------------------- embed


def run_embed(args: argparse.Namespace) -> int:
    from retrieval.api import bench_embed

    dtypes = None if args.dtypes is None else [d.strip() for d in args.dtypes.split(",")]
    runtimes = None if args.runtimes is None else [
        r.strip() for r in args.runtimes.split(",") if r.strip()] or [args.runtimes]
    batch_sizes = _int_list("--batch-sizes", args.batch_sizes)
    token_budgets = _int_list("--token-budgets", args.token_budgets)
    bar, progress = _bar("bench embed")
    try:
        run = bench_embed(
            args.config, out=args.out, progress=progress, force=args.force,
            collection=args.collection, texts_file=args.texts_file, sample=args.sample,
            seed=args.seed, batch_sizes=batch_sizes, token_budgets=token_budgets,
            length_sorted=False if args.no_sorted else None, dtypes=dtypes, model=args.model,
            engine=args.engine, single_limit=args.single_limit, torch_threads=args.threads,
            runtimes=runtimes, quality=args.quality,
        )
    finally:
        if bar is not None:
            bar.close()
    result = run.outcome
    s = result.summary
    if args.json:
        print_json({**s, "rows": result.rows, "run_dir": str(run.path)})
    else:
        _print_embed(result.rows, s)
        print(f"run directory: {run.path}")
    if not result.agreement.ok:
        print(f"rwb: error: {result.agreement.message()}", file=sys.stderr)
        return 1
    return 0


def _print_embed(rows: list[dict[str, Any]], s: dict[str, Any]) -> None:
    t = s["tokens"]
    print(f"{s['n_texts']} texts, {s['model_id']} ({s['engine']}), tokens/text mean "
          f"{t['mean']:.1f} p95 {t['p95']:.0f} max {t['max']} (limit {s['max_tokens']}); "
          f"latency = one call (one batch), ms")
    print_table(
        [(r["setting"], r["n_texts"], r["mean_batch"], r["texts_per_s"], r["tokens_per_s"],
          r["call_p50_ms"] if r["latency_measured"] else None,
          r["call_p95_ms"] if r["latency_measured"] else None,
          r["padding_waste"], r["speedup_vs_single"]) for r in rows],
        ["setting", "texts", "batch", "texts/s", "tokens/s", "p50_ms", "p95_ms", "pad_waste",
         "x_single"],
    )
    print(f"best: {s['best_setting']}  {fmt(s['speedup'])}x one-at-a-time, "
          f"{fmt(s['speedup_vs_library'])}x {s['library_setting']} (library encode)")
    print(f"batched vs single: max abs diff {s['max_abs_diff']:.2e} "
          f"({'ok' if s['agree'] else 'FAIL'}, tolerance {s['tolerance']:g})")
    b = s["bf16"]
    if b.get("measured"):
        d = b["drift"]
        print(f"bf16 ({b['setting']}): {fmt(b['speedup_vs_fp32_best'])}x fp32 best; "
              f"1-cos mean {d['cos_dist_mean']:.2e} max {d['cos_dist_max']:.2e}; "
              f"recall@{d.get('k', '-')} vs fp32 {fmt(d.get('recall_at_k'))}")
    else:
        print(f"bf16: not measured ({b.get('reason')})")
    if s.get("runtimes"):
        _print_runtimes(s["runtimes"])


def _print_runtimes(rt: dict[str, Any]) -> None:
    q = rt["quality"]
    print(f"runtimes (best batched setting of each; drift and speedups vs torch fp32; "
          f"tolerance: {rt['tolerance']['rule']}):")
    rows = []
    for name, e in rt["by_runtime"].items():
        d, qq = e["drift"], e.get("quality") or {}
        rows.append((name, e["best_setting"], e["texts_per_s"], e["call_p50_ms"],
                     e["call_p95_ms"], e["single_texts_per_s"], e["speedup_vs_single"],
                     e["speedup_vs_library"], d["cos_dist_mean"], d["cos_dist_max"],
                     d.get("recall_at_k"), qq.get("ndcg@10"), qq.get("recall@10"),
                     "yes" if e["within_tolerance"] else "no"))
    print_table(rows, ["runtime", "best", "texts/s", "p50_ms", "p95_ms", "single/s",
                       "x_single", "x_encode32", "1-cos_mean", "1-cos_max", "recall@k",
                       "ndcg@10", "recall@10", "usable"])
    f = rt["fastest_within_tolerance"]
    if f.get("runtime"):
        print(f"fastest within tolerance: {f['runtime']} ({f['setting']}) {fmt(f['texts_per_s'])}"
              f" texts/s = {fmt(f['speedup_vs_library'])}x torch encode(batch_size=32), "
              f"{fmt(f['speedup_vs_torch_single'])}x torch one-at-a-time")
    else:
        print(f"fastest within tolerance: none ({f.get('reason')})")
    loose = rt.get("fastest_within_quality_tolerance") or {}
    if loose.get("runtime"):
        print(f"fastest keeping SciFact recall@10 >= {rt['tolerance']['quality_tolerance']:g} x "
              f"fp32's (overlap aside): {loose['runtime']} ({loose['setting']}) "
              f"{fmt(loose['speedup_vs_library'])}x torch encode(batch_size=32)")
    if q.get("measured"):
        print(f"quality: {q['collection']} {q['n_queries']} queries, {q['n_docs']} docs "
              f"({q['docs_rule']}), {q['search']}")


# --------------------------------------------------------------------------- fan-out


def run_fanout(args: argparse.Namespace) -> int:
    from retrieval.api import bench_fanout

    bar, progress = _bar("bench fanout")
    try:
        run = bench_fanout(args.spec, out=args.out, progress=progress, force=args.force,
                           backend=args.backend, server=args.server, servers=args.servers,
                           queries=args.queries, rounds=args.rounds)
    finally:
        if bar is not None:
            bar.close()
    s = run.outcome.summary
    if args.json:
        print_json({**s, "run_dir": str(run.path)})
        return 0
    _print_fanout(s)
    print(f"run directory: {run.path}")
    return 0


def _print_fanout(s: dict[str, Any]) -> None:
    cols = ", ".join(f"{c['name']}={c['n']} ({c['backend']})" for c in s["collections"])
    print(f"{s['n_queries']} queries from {s['queries']}, k={s['k']}, fusion "
          f"{s['fusion']['method']}; collections: {cols}")
    rows = []
    for mode, m in s["modes"].items():
        fails = ",".join(f"{n}:{v['errors'] + v['timeouts']}" for n, v in m["failures"].items())
        rows.append((mode, m["p50_ms"], m["p95_ms"], m["p99_ms"], m["qps"],
                     m.get("speedup_p50"), m["cpu_cores"], m["runq_wait_cores"],
                     m["child_cpu_cores"], fails or "-"))
    print_table(rows, ["mode", "p50_ms", "p95_ms", "p99_ms", "qps", "speedup", "cpu_cores",
                       "runq_wait", "server_cores", "failures"])
    for mode, text in s["verdict"].items():
        print(f"  {mode}: {text}")
    q = s["quality"]
    if q.get("available"):
        print(f"quality vs {q['qrels']}:")
        print_table([(r["ranking"], *(r[m] for m in q["metrics"]), r["share"] or "-")
                     for r in q["rows"]], ["ranking", *q["metrics"], "share of fused"])
        rc = q["ranx_rrf"]
        if rc.get("checked"):
            print(f"RRF vs ranx.fuse: {rc['identical']}/{rc['queries']} queries identical")
    else:
        print(f"quality: {q.get('reason')}")


# --------------------------------------------------------------------------- load


def _register_load(bsub: argparse._SubParsersAction) -> None:
    g = bsub.add_parser(
        "load", help="latency under closed/open-loop load; max QPS within a p99 SLO",
        description="Load each config of SPEC with closed loops (N clients) and open loops "
        "(fixed or Poisson arrivals), record corrected (from the intended send time) and "
        "uncorrected latency in HDR histograms, and search the highest offered rate whose "
        "corrected p99 meets the SLO with recall at the target.",
    )
    g.add_argument("spec", help="load spec YAML (e.g. sweeps/load-quickstart.yaml)")
    g.add_argument("--p99-ms", type=float, help="SLO: corrected p99 in ms (overrides slo.p99_ms)")
    g.add_argument("--target-recall", type=float, help="SLO: recall@k at least this")
    g.add_argument("--duration", type=float, help="seconds per point, warm-up included")
    g.add_argument("--client", choices=["threads", "asyncio", "processes"],
                   help="how the clients run (default: the spec's)")
    g.add_argument("--redis-url", help="Redis for the cache section (default $REDIS_URL, else "
                   "a private server)")
    g.add_argument("--json", action="store_true", help="print summary.json")
    g.add_argument("--trace", action="store_true",
                   help="OpenTelemetry: one span per measured point, to --otlp-dir and/or "
                   "OTLP/HTTP at $OTEL_EXPORTER_OTLP_ENDPOINT")
    g.add_argument("--otlp-dir", help="write the spans as OTLP JSON lines (traces.jsonl) here "
                   "(implies --trace)")
    g.add_argument("--out", help="run directory (default runs/<id>; refused if non-empty)")
    g.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    g.set_defaults(func=run_load)


def run_load(args: argparse.Namespace) -> int:
    from retrieval.api import bench_load

    bar, progress = _bar("bench load")
    try:
        run = bench_load(args.spec, out=args.out, progress=progress, force=args.force,
                         p99_ms=args.p99_ms, target_recall=args.target_recall,
                         duration=args.duration, client=args.client, redis_url=args.redis_url,
                         trace=args.trace, otlp_dir=args.otlp_dir)
    finally:
        if bar is not None:
            bar.close()
    result = run.outcome
    s = result.summary
    if args.json:
        print_json({**s, "run_dir": str(run.path)})
    else:
        _print_load(s)
        print(f"run directory: {run.path}")
    if result.partial:
        print(f"rwb: error: run ended early, partial results kept: {s['aborted']}",
              file=sys.stderr)
        return 1
    return 0


def _print_load(s: dict[str, Any]) -> None:
    slo = s["slo"]
    print(f"SLO: corrected p99 <= {slo['p99_ms']:g} ms, recall >= {slo['target_recall']}; "
          f"clients as {s['client']}; latency ms")
    for c in s["configs"]:
        if "scaling" in c:
            print(f"{c['label']} ({c['backend']}): capacity {fmt(c.get('capacity_qps'))} QPS "
                  f"(limited by {c.get('limited_by')}); {c['scaling']['verdict']}")
        w = c.get("writes")
        if w:
            print(f"{c['label']} ({c['backend']}) while writing {w['insert_rate']:g} inserts/s "
                  f"+ {w['delete_rate']:g} deletes/s: capacity {fmt(w['capacity_qps'])} QPS "
                  f"(limited by {w['limited_by']}); live {w['initial_rows']} -> "
                  f"{w['live_end']}" + (f"; writer failed: {w['writer_errors'][0]}"
                                        if w["writer_errors"] else ""))
        print_table(
            [(p["mode"], p["clients"], p["offered_qps"], p["achieved_qps"], p["p50_ms"],
              p["p99_ms"], p["p99_ms_uncorrected"], p["recall"], p["errors"] + p["timeouts"],
              p["lag_p99_us"], "yes" if p["meets_slo"] else "no") for p in c["points"]],
            ["mode", "clients", "offered", "achieved", "p50", "p99", "p99_uncorr", "recall",
             "failed", "lag_us", "slo"],
        )
    for line in s["health"]:
        print(f"  note: {line}")


# --------------------------------------------------------------------------- churn


def _register_churn(bsub: argparse._SubParsersAction) -> None:
    c = bsub.add_parser(
        "churn", help="recall under inserts and deletes: a runbook, drift vs damage, advice",
        description="Apply SPEC's runbook (insert / delete / replace / search / maintain steps "
        "over the dataset's base rows; the index starts empty) to each config; at every search "
        "step measure recall@k against the live set's exact top-k, a fresh-build control "
        "(drift vs damage), latency, writes, and the knob that holds the target; print one "
        "line of advice per config.",
    )
    c.add_argument("spec", help="churn spec YAML (e.g. sweeps/churn-qqp20k.yaml)")
    c.add_argument("--target-recall", type=float, help="the recall the advice holds")
    c.add_argument("--queries", type=int, help="the first N queries")
    c.add_argument("--json", action="store_true", help="print summary.json")
    c.add_argument("--out", help="run directory (default runs/<id>; refused if non-empty)")
    c.add_argument("--resume", action="store_true",
                   help="continue a killed run in --out from each config's last finished step")
    c.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    c.set_defaults(func=run_churn_cmd)


def run_churn_cmd(args: argparse.Namespace) -> int:
    from retrieval.api import bench_churn

    bar, progress = _bar("bench churn")
    try:
        result = bench_churn(args.spec, out=args.out, progress=progress, force=args.force,
                             resume=args.resume, target_recall=args.target_recall,
                             queries=args.queries)
    finally:
        if bar is not None:
            bar.close()
    s = result.summary.to_json_dict()
    if args.json:
        print_json({**s, "run_dir": str(result.path)})
        return 0
    _print_churn(s)
    print(f"run directory: {result.path}")
    return 0


def _print_churn(s: dict[str, Any]) -> None:
    rb = s["runbook"]
    print(f"{s['dataset']}: {s['n_queries']} queries, k={s['k']}, target "
          f"{s['target_recall']}; runbook {rb['steps']} steps "
          f"({', '.join(f'{n} {op}' for op, n in rb['ops'].items() if n)}), peak "
          f"{rb['peak_live']} live; drift/damage in recall points")
    for c in s["configs"]:
        knob = f", {c['knob']} {c['knob_value']}" if c["knob"] else ""
        print(f"{c['label']} ({c['backend']}{knob}):")
        rows = [(r["step"], r["live"], r["recall"], r["recall_lower"], r["control_recall"],
                 None if r["drift"] is None else 100 * r["drift"],
                 None if r["damage"] is None else 100 * r["damage"], r["p99_ms"],
                 r["short_queries"], r["dead_fraction"], r["tuned_knob"])
                for r in c["steps"] if r["op"] == "search"]
        print_table(rows, ["step", "live", "recall", "lower", "control", "drift", "damage",
                           "p99_ms", "short", "dead", "tuned"])
        print(f"  advice: {c['advice']['line']}")
