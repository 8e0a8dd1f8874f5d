"""`rwb report RUN`: a self-contained HTML page (plots as embedded PNG, the summary table, the
manifest) and the plots as PNG files beside it, for any run directory rwb writes."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write an HTML report (plots, summary table, manifest) of a run directory",
        description=(
            "Render RUN (rwb eval, rwb sweep, rwb bench embed|fanout, rwb tune rerank|cache, "
            "or the cross-layer study) into one self-contained HTML page and PNG files beside "
            "it (<stem>_<plot>.png)."
        ),
    )
    p.add_argument("run", help="run directory")
    p.add_argument("--out", help="HTML file to write (default RUN/report.html); an existing "
                   "file rwb did not write is refused")
    p.add_argument("--force", action="store_true",
                   help="replace --out even if it is a file rwb did not write")
    p.add_argument(
        "--remeasure",
        action="store_true",
        help="index runs without stored per-query recall (sweeps): rebuild the chosen config "
        "from the run's spec and dataset to plot its per-query recall",
    )
    p.add_argument("--target-recall", type=float,
                   help="eval runs: recall@k target to draw and to pick the chosen configs by "
                        "(default: the run's own target)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.api import report

    result = report(args.run, args.out, remeasure=args.remeasure,
                    target_recall=args.target_recall, force=args.force)
    print(f"report ({result.kind}): {result.html}")
    for png in result.pngs:
        print(f"  {png}")
    return 0
