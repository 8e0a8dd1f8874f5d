"""`rwb eval SPEC`: evaluate every build x search config; `rwb backends`: what is importable."""

from __future__ import annotations

import argparse
from typing import Any

from retrieval.cli._common import close_bar, print_json, print_table, progress_bar
from retrieval.cli.printers import prints


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate the indexes of a sweep spec (recall, latency, QPS)")
    p.add_argument("spec", help="sweep spec YAML (e.g. sweeps/quickstart.yaml)")
    p.add_argument("--out", help="run directory (default runs/<id>; refused if non-empty)")
    p.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--threads", type=int, help="override the spec's (search) thread count")
    p.add_argument("--build-threads", type=int,
                   help="threads for index builds (default: the spec's index_build.threads, else "
                   "every CPU)")
    p.set_defaults(func=run_eval_cmd)

    b = sub.add_parser("backends", help="list index backends, whether importable, and versions")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=run_backends)


def run_eval_cmd(args: argparse.Namespace) -> int:
    from retrieval.api import evaluate
    from retrieval.cli.printers import print_run

    bar, progress = progress_bar("eval", unit="config")
    try:
        run = evaluate(args.spec, out=args.out, threads=args.threads,
                       build_threads=args.build_threads, progress=progress, force=args.force)
    finally:
        close_bar(bar)
    summary = run.to_dict()
    if args.json:
        print_json(summary)
        return 0
    print_run("eval", summary, str(run.path))
    return 0


@prints("eval")
def print_eval(summary: dict[str, Any], run_dir: str, as_json: bool = False) -> None:
    """The measured configs of an eval run, one row each."""
    rows = [
        (
            r["backend"],
            r["build"],
            r["search"],
            r["recall"],
            r["recall_p5"],
            r["p50_ms"],
            r["p95_ms"],
            r["p99_ms"],
            r["qps"],
            r["build_s"],
            r["memory_bytes"],
        )
        for r in summary["rows"]
    ]
    print(
        f"dataset {summary['dataset']}  k={summary['k']}  "
        f"(recall@k by id; latency single-query ms; QPS batch)"
    )
    print_table(
        rows,
        [
            "backend",
            "build",
            "search",
            "recall",
            "p5",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "qps",
            "build_s",
            "mem_bytes",
        ],
    )
    print(f"run directory: {run_dir}")


def run_backends(args: argparse.Namespace) -> int:
    from retrieval.api import list_backends

    status = list_backends()
    if args.json:
        print_json([s.__dict__ for s in status])
        return 0
    print_table(
        [
            (s.name, s.family, "yes" if s.available else "no", s.version or "-", s.reason or "")
            for s in status
        ],
        ["backend", "family", "available", "version", "note"],
    )
    return 0
