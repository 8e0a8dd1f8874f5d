"""`rwb sweep SPEC`: tune a sweep spec (grid | target | optuna) into an Optuna study and print the
cheapest config meeting the target per backend."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from retrieval.cli._adaptive import print_adaptive
from retrieval.cli._common import close_bar, fmt, print_json, print_table, progress_bar
from retrieval.cli.printers import prints, strict_checks
from retrieval.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="tune a sweep spec against a recall target (grid, target search or Optuna)",
        description=(
            "Tune SPEC. Every measured config is a trial of an Optuna study (default: SQLite in "
            "the run directory). Re-running with the same --out, or the same --storage and "
            "--study, resumes a killed sweep and keeps every finished trial; several workers "
            "may share one --storage. A spec with 'kind: rag-study' (e.g. "
            "sweeps/rag-end-to-end.yaml) runs the cross-layer study instead: index knob x "
            "rerank depth x cache threshold, Optuna NSGA-II (--n-trials, --storage, --study, "
            "--target-recall apply). A spec with 'live:' and no 'dataset' (e.g. "
            "sweeps/live-pgvector.yaml) tunes the search knob of a collection you already run, "
            "in place and read-only, under its budget (docs/live.md; --target-recall, --out, "
            "--json, --strict apply)."
        ),
    )
    p.add_argument("spec", help="sweep spec YAML (e.g. sweeps/quickstart.yaml)")
    p.add_argument("--strategy", help="grid | target | optuna (default: the spec's tune.strategy)")
    p.add_argument("--target-recall", type=float, help="recall@k target in (0, 1]")
    p.add_argument(
        "--storage",
        help="Optuna storage: sqlite:///PATH, postgresql://..., mysql://..., redis://..., "
        "journal:PATH or PATH.log (default: sqlite in the run directory)",
    )
    p.add_argument("--study", help="study name (default: the spec's name)")
    p.add_argument("--n-trials", type=int, help="optuna: build configs to propose")
    p.add_argument("--out", help="run directory (default runs/<id>; a non-empty one is "
                   "refused unless it holds this sweep, which is then resumed)")
    p.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    p.add_argument("--json", action="store_true", help="print summary.json")
    p.add_argument("--threads", type=int, help="override the spec's (search) thread count")
    p.add_argument("--build-threads", type=int,
                   help="threads for index builds (default: the spec's index_build.threads, else "
                   "every CPU; more than one makes HNSW builds irreproducible)")
    p.add_argument("--executor", default="local", choices=("local", "ray"),
                   help="local: measure in this process (default); ray: each build config is "
                   "a Ray task (CPUs = build threads, memory from the index's expected size), "
                   "the study in --storage stays the source of truth (docs/distributed.md)")
    p.add_argument("--ray-address",
                   help="--executor ray: the cluster to join (e.g. 127.0.0.1:6379; default: "
                   "RAY_ADDRESS, else a Ray started in this process)")
    p.add_argument("--trace", action="store_true",
                   help="OpenTelemetry: one span per completed trial, to --otlp-dir and/or "
                   "OTLP/HTTP at $OTEL_EXPORTER_OTLP_ENDPOINT")
    p.add_argument("--otlp-dir", help="write the spans as OTLP JSON lines (traces.jsonl) here "
                   "(implies --trace)")
    p.add_argument(
        "--strict", action="store_true",
        help="exit 1 when a backend has no config meeting the target, or a chosen config misses "
        "it on the held-out queries (exit codes: docs/exit-codes.md)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.api import sweep
    from retrieval.cli.printers import print_run
    from retrieval.cli.printers import strict_exit as print_strict
    from retrieval.study.spec import is_study_spec
    from retrieval.tune.storage import StorageLost

    if is_study_spec(args.spec):  # kind: rag-study -> the cross-layer study (retrieval.study)
        from retrieval.cli.sweep_study import run_study_cmd

        if args.executor != "local" or args.ray_address:
            raise ConfigError(f"{args.spec}: --executor / --ray-address apply to index sweeps, "
                              f"not to a rag-study")
        if args.strict:
            raise ConfigError(f"{args.spec}: --strict applies to index sweeps, not to a "
                              f"rag-study (its held-out comparison is in its summary)")
        if args.trace or args.otlp_dir:
            raise ConfigError(f"{args.spec}: --trace / --otlp-dir apply to index sweeps (one "
                              f"span per trial), not to a rag-study")

        return run_study_cmd(args)
    desc = f"sweep ({args.strategy})" if args.strategy else "sweep"
    bar, progress = progress_bar(desc, unit="config", width=70, use_total=False)
    try:
        run = sweep(args.spec, out=args.out, strategy=args.strategy,
                    target_recall=args.target_recall, storage=args.storage, study=args.study,
                    n_trials=args.n_trials, threads=args.threads,
                    build_threads=args.build_threads, progress=progress, force=args.force,
                    executor=args.executor, ray_address=args.ray_address,
                    trace=args.trace, otlp_dir=args.otlp_dir)
    except StorageLost as exc:
        raise StorageLost(f"{exc}; resume once it answers again with: "
                          f"{resume_command(args, exc.run_path)}", exc.run_path) from None
    finally:
        close_bar(bar)
    summary = run.to_dict()
    if args.json:
        print_json(summary)
    else:
        print_run("sweep", summary, str(run.path))
    return print_strict("sweep", summary) if args.strict else 0


def resume_command(args: argparse.Namespace, run_path: Any) -> str:
    """The command that resumes this sweep: the same options (the storage's credentials
    removed), with ``--out`` the run directory it wrote."""
    import shlex

    from retrieval.redact import redact_uri

    words = ["rwb", "sweep", str(args.spec)]
    for flag, value in (("--strategy", args.strategy), ("--target-recall", args.target_recall),
                        ("--n-trials", args.n_trials), ("--threads", args.threads),
                        ("--build-threads", args.build_threads),
                        ("--storage", redact_uri(args.storage) if args.storage else None),
                        ("--study", args.study),
                        ("--executor", _non_default(getattr(args, "executor", None))),
                        ("--ray-address", getattr(args, "ray_address", None)),
                        ("--out", run_path if run_path is not None else args.out)):
        if value is not None:
            words += [flag, str(value)]
    hidden = bool(args.storage) and redact_uri(args.storage) != args.storage
    return shlex.join(words) + (" (with the storage's credentials where *** stands)"
                                if hidden else "")


def _non_default(executor: str | None) -> str | None:
    return None if executor in (None, "local") else executor


def heldout_failures(s: dict[str, Any]) -> list[str]:
    """Index labels whose chosen config misses the target on the held-out queries."""
    return [label for label, b in s["backends"].items() if b.get("heldout_meets") is False]


@strict_checks("sweep")
def strict_exit(s: dict[str, Any]) -> int:
    """--strict: 1 (with one line per failure on stderr) when a backend has no config meeting
    the target or the held-out check failed, else 0."""
    from retrieval.tune.summary import missed_labels

    failing = heldout_failures(s)
    missed = missed_labels(s)
    if missed:
        print(f"rwb sweep: --strict: no config meets target {s.get('target_recall')} for "
              f"{', '.join(missed)}", file=sys.stderr)
    if failing:
        recalls = ", ".join(f"{label} {_num(s['backends'][label]['heldout_recall'])}"
                            for label in failing)
        print(f"rwb sweep: --strict: held-out check failed: mean recall on the held-out queries "
              f"below target {s.get('target_recall')} ({recalls})", file=sys.stderr)
    return 1 if failing or missed else 0


def _search(d: dict[str, Any] | None) -> str:
    return ",".join(f"{k}={fmt(v)}" for k, v in (d or {}).items()) or "-"


def _num(v: Any, digits: int = 4) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


def _print_quality(s: dict[str, Any]) -> None:
    """A quality target's comparison (``quality``): the recall knob beside the nDCG knob."""
    qs = s.get("quality")
    if not qs:
        return
    print(f"quality target: {qs['metric']} non-inferior to exact search by {qs['margin']} "
          f"(paired one-sided t-test, alpha {qs['alpha']}; exact {_num(qs.get('exact'))} over "
          f"{qs.get('n_queries')} judged tuning queries)")
    rows: list[tuple[Any, ...]] = []
    for label, q in (qs.get("by_index") or {}).items():
        for role in ("recall", "quality"):
            p = q.get(role)
            if p is None:
                rows.append((label, f"knob_{role}", "-", "none found", "-", "-", "-", "-"))
                continue
            rows.append((label, f"knob_{role}", _search(p["search"]), _num(p["value"]),
                         _num(p["lower_bound"]), fmt(p["distance_computations"]),
                         fmt(p["p50_ms"]), "yes" if q.get("agree") else "no"))
    print_table(rows, ["backend", "choice", "search", qs["metric"], "diff lower", "dist/query",
                       "p50 ms", "agree"])


def _print_costs(s: dict[str, Any]) -> None:
    """The monthly cost lines (tune.cost): the priced N, and the scale study's larger Ns."""
    priced = [(label, b["cost"]) for label, b in s["backends"].items() if b.get("cost")]
    if not priced:
        return
    c0 = priced[0][1]
    prices = c0.get("prices") or {}
    print(f"per month = measured bytes/vector x {c0['n']:,} vectors at "
          f"{prices.get('ram_gb_month')} per GB-month of RAM"
          + (f" + on-disk bytes at {prices['disk_gb_month']} per GB-month"
             if prices.get("disk_gb_month") else ""))
    for label, b in s["backends"].items():
        at = b.get("cost_at") or []
        if at:
            print(f"{label} at larger N (scale study, same bytes/vector): " + ", ".join(
                f"{a['n']:,} -> {a['per_month']:.2f}/month" for a in at))


@prints("sweep")
def print_result(s: dict[str, Any], run_dir: str, as_json: bool = False) -> None:
    target = s.get("target_recall")
    conf = s["confidence"]
    q = s["queries"]
    k = s["k"]
    aim = f"target recall@{k} >= {target}" if target is not None else "no target"
    ran = s["strategy"]
    how = {"grid": "every listed value", "target": "smallest knob value meeting the target",
           "optuna": "Optuna-proposed builds, each solved by target"}.get(ran, "")
    print(f"{s['name']} on {s['dataset']} (k={k}): {aim}, strategy {ran}"
          + (f" ({how})" if how else ""))
    if target is not None:
        print(f"meets = {conf['level']:.0%} {conf['method']} lower bound over {q['tuning']} "
              f"tuning queries >= target; held-out = mean recall on {q['heldout']} other queries")
    chosen = [b["chosen"] for b in s["backends"].values() if b["chosen"] is not None]
    show_bytes = any(c.get("bytes_per_vector") is not None for c in chosen)
    show_cost = any(b.get("cost") for b in s["backends"].values())
    rows: list[tuple[Any, ...]] = []
    for label, b in s["backends"].items():
        c = b["chosen"]
        extra: tuple[Any, ...] = ()
        if c is None:
            why = "no config meets the target" if target is not None else "no target set"
            extra = ("-",) * (show_bytes + show_cost)
            rows.append((label, why, "", "-", "-", "-", "-", "-", *extra, b["evaluations"]))
            continue
        held = _num(b["heldout_recall"])
        if b["heldout_meets"] is False:
            held += " FAIL"
        if show_bytes:
            extra += (_num(c.get("bytes_per_vector"), 1),)
        if show_cost:
            extra += (_num((b.get("cost") or {}).get("per_month"), 2),)
        rows.append((
            label, _search(c["build"]), _search(c["search"]), _num(c["recall"]),
            _num(c["recall_lb"]), held, fmt(c["p95_ms"]), c["qps"], *extra, b["evaluations"],
        ))
    heads = ["backend", "build", "search", "recall", "lower", "held-out", "p95 ms", "QPS"]
    heads += ["bytes/vec"] * show_bytes + ["per month"] * show_cost
    print_table(rows, [*heads, "evals"])
    _print_costs(s)
    _print_quality(s)
    print_adaptive(s.get("adaptive"))
    from retrieval.tune.summary import miss_hint, missed_labels

    for label in missed_labels(s):
        print(f"{label}: no config meets the target: {miss_hint(s, label)}")
    failing = heldout_failures(s)
    if failing:
        print(f"held-out FAIL: {', '.join(failing)}: mean recall on the held-out queries is below "
              f"the target")
    hours = [f"{label} {b['node_hours']:.4f}" for label, b in s["backends"].items()
             if b.get("node_hours") is not None]
    if hours:
        print(f"node-hours per configuration found (every build of the entry): "
              f"{', '.join(hours)}")
    cost = {"qps": "highest batch QPS", "bytes_per_vector": "fewest measured bytes per vector"
            }.get(s.get("objective") or "", "lowest single-query p95 ms")
    print(f"cheapest = {cost} per backend; within a build, the smallest knob value meeting the "
          f"target")
    print(f"run: {run_dir}  (study '{s['study']['name']}' in {s['study']['storage']})")
