"""Hybrid fusion tuned with significance vs RRF(60) vs the best single leg (issue 32).

For each collection: ``rwb tune fusion`` (dense MiniLM exact + BM25 bm25s lucene, the grid of
sweeps/scifact-fusion.yaml) and, on the test split, nDCG@10 of the tuned fusion, of RRF(60,
equal weights) and of the best single leg, the paired randomisation p-values (tuned vs each),
and each leg's single-query cost (p50 / p95 ms, measured in the same run). Collections:
``scifact`` (BEIR test claims), ``cranfield`` (graded), ``reuters`` (the rwb Reuters manifest;
it has no relevance judgments, so it is reported as not measurable unless a manifest of kind text
with qrels is given). Printed, never asserted; prints the CPU model and load average.

Usage: python benchmarks/hybrid.py [--datasets scifact,cranfield,reuters-labelled]
       [--max-queries N] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

SPEC = Path(__file__).resolve().parent.parent / "sweeps" / "scifact-fusion.yaml"


def _cpu() -> str:
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    return cpu


def one(dataset: str, max_queries: int | None, out: Path) -> dict[str, Any] | str:
    """The summary of one collection's run, or why it could not run."""
    from retrieval.api import tune_fusion
    from retrieval.errors import ConfigError, DataError

    spec = yaml.safe_load(SPEC.read_text())
    spec.update({"name": f"hybrid-{dataset}", "dataset": dataset})
    if max_queries:
        spec["max_queries"] = max_queries
    try:
        return tune_fusion(spec, out=out / dataset).to_dict()
    except (ConfigError, DataError) as exc:
        return f"not measurable: {exc}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="scifact,cranfield,reuters-labelled")
    ap.add_argument("--max-queries", type=int)
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    out = Path(args.out or tempfile.mkdtemp(prefix="rwb-bench-hybrid-"))
    print(f"CPU {_cpu()}, {os.cpu_count()} cores; load average before: {os.getloadavg()}")
    for name in args.datasets.split(","):
        t0 = time.perf_counter()
        s = one(name, args.max_queries, out)
        took = time.perf_counter() - t0
        if isinstance(s, str):
            print(f"{name}: {s}")
            continue
        b, c, legs = s["baselines"], s["chosen"], s["legs"]
        best = s["best_single_leg"]
        print(f"{name}: {s['n_docs']} docs, {s['n_queries']} queries ({s['n_dev']} dev / "
              f"{s['n_test']} test), {len(s['candidates'])} candidates, {took:.0f} s")
        print(f"  test nDCG@10: tuned {c['test']:.4f} [{c['label']}]  rrf60 "
              f"{b['rrf60']['test']:.4f}  dense {b['dense']['test']:.4f}  bm25 "
              f"{b['bm25']['test']:.4f}")
        print(f"  tuned - rrf60 {c['vs_rrf60']['mean_diff']:+.4f} (p {c['p_value']:.3g}); "
              f"tuned - {best} {c['vs_best_leg']['mean_diff']:+.4f} "
              f"(p {c['vs_best_leg']['p_value']:.3g})")
        print("  leg cost (single query, ms): " + "  ".join(
            f"{leg} p50 {v['p50_ms']:.2f} p95 {v['p95_ms']:.2f}" for leg, v in legs.items()))
        print(f"  verdict: {s['verdict']}")
    print(f"load average after: {os.getloadavg()}; run directories under {out}")


if __name__ == "__main__":
    main()
