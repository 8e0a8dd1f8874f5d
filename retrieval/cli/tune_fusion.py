"""`rwb tune fusion SPEC`: hybrid fusion (dense + BM25) tuned on a dev split, judged on the test
split with a paired significance test against RRF(60) and the best single leg."""

from __future__ import annotations

import argparse

from retrieval.cli._common import close_bar, print_json, progress_bar


def register(tune_sub: argparse._SubParsersAction) -> None:
    p = tune_sub.add_parser(
        "fusion",
        help="tune hybrid fusion (RRF k / weights, convex alpha + normalisation, leg depths); "
             "judged on the test split with a paired significance test",
    )
    p.add_argument("spec", help="fusion spec YAML (e.g. sweeps/scifact-fusion.yaml)")
    p.add_argument("--out", help="run directory (default runs/<id>; refused if non-empty)")
    p.add_argument("--force", action="store_true",
                   help="write into --out even if it is a non-empty folder")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--max-queries", type=int, help="override: seeded subset of the queries")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.api import tune_fusion
    from retrieval.fusion_tune.summary import summary_lines

    bar, progress = progress_bar("tune fusion", width=40)
    try:
        result = tune_fusion(args.spec, out=args.out, max_queries=args.max_queries,
                             progress=progress, force=args.force)
    finally:
        close_bar(bar)
    if args.json:
        print_json(result.to_dict())
        return 0
    for line in summary_lines(result.to_dict()):
        print(line)
    return 0
