"""Hybrid fusion tuned with significance vs RRF(60) vs the best single leg (issue 32).

For each collection: ``rwb tune fusion`` (dense MiniLM exact + BM25 bm25s lucene, the grid of
sweeps/scifact-fusion.yaml; with ``--sparse ENGINE`` a third leg, the BM25 weights in that
engine's sparse index, and the three-leg default grid) and, on the test split, nDCG@10 of the
tuned fusion, of RRF(60, equal weights) and of the best single leg, the paired randomisation
p-values (tuned vs each), and each leg's single-query cost (p50 / p95 ms, measured in the same
run) beside the gain it brings. Collections: ``scifact`` (BEIR test claims), ``cranfield``
(graded), ``reuters-labelled`` (the rwb Reuters manifest: newswire paragraphs with topic labels
and no relevance judgments, so it is reported as not measurable). Printed, never asserted;
prints the CPU model and the load average before and after.

``--max-queries N --max-docs M`` runs on a seeded cut of each collection (N judged queries,
their judged documents and others up to M; a BEIR folder under ``--out``): the tiny size that
proves the script works, e.g. ``--max-queries 12 --max-docs 120 --datasets cranfield``.

Usage: python benchmarks/hybrid.py [--datasets scifact,cranfield,reuters-labelled]
       [--max-queries N] [--max-docs M] [--sparse qdrant] [--out DIR]
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


def _judged(dataset: str) -> Any:
    """The collection, or DataError when it has no relevance judgments (qrels)."""
    from retrieval.errors import DataError
    from retrieval.rerank.dataset import check_dataset, load_dataset

    coll = load_dataset(check_dataset(dataset, "test", "benchmarks/hybrid.py"), "test")
    if not any(coll.qrels.values()):
        raise DataError(f"{dataset}: the collection has no relevance judgments (qrels)")
    return coll


def _cut(dataset: str, n_queries: int, n_docs: int, out: Path) -> str:
    """A seeded BEIR cut of ``dataset`` (``beir:FOLDER``)."""
    from retrieval.testing.byo import write_beir

    return "beir:" + str(write_beir(_judged(dataset), out / f"{dataset}-cut",
                                    n_queries=n_queries, n_docs=n_docs, seed=0))


def one(dataset: str, args: argparse.Namespace, out: Path) -> dict[str, Any] | str:
    """The summary of one collection's run, or why it could not run."""
    from retrieval.api import tune_fusion
    from retrieval.errors import ConfigError, DataError

    spec = yaml.safe_load(SPEC.read_text())
    spec.update({"name": f"hybrid-{dataset}", "dataset": dataset})
    if args.sparse:
        spec["sparse"] = {"engine": args.sparse}
        spec.pop("fusion")  # the three-leg default grid (the two-leg lists, cubed, are refused)
    try:
        if args.max_docs:
            spec["dataset"] = _cut(dataset, args.max_queries or 40, args.max_docs, out)
            spec["latency"] = {"sample_queries": 5}
        else:
            _judged(dataset)  # a collection without qrels says so before anything is embedded
            if args.max_queries:
                spec["max_queries"] = args.max_queries
        return tune_fusion(spec, out=out / dataset).to_dict()
    except (ConfigError, DataError) as exc:
        return f"not measurable: {exc}"


def report(name: str, s: dict[str, Any], took: float) -> None:
    b, c, legs = s["baselines"], s["chosen"], s["legs"]
    best = s["best_single_leg"]
    print(f"{name}: {s['n_docs']} docs, {s['n_queries']} queries ({s['n_dev']} dev / "
          f"{s['n_test']} test), {len(s['candidates'])} candidates, {took:.0f} s")
    print(f"  test nDCG@10: tuned {c['test']:.4f} [{c['label']}]  rrf60 "
          f"{b['rrf60']['test']:.4f}  " + "  ".join(f"{leg} {b[leg]['test']:.4f}"
                                                    for leg in legs))
    print(f"  tuned - rrf60 {c['vs_rrf60']['mean_diff']:+.4f} (p {c['p_value']:.3g}); "
          f"tuned - {best} {c['vs_best_leg']['mean_diff']:+.4f} "
          f"(p {c['vs_best_leg']['p_value']:.3g})")
    print("  leg cost (single query, ms) and gain: " + "  ".join(
        f"{leg} p50 {v['p50_ms']:.2f} p95 {v['p95_ms']:.2f} gain {v['gain']:+.4f}"
        for leg, v in legs.items()))
    print(f"  verdict: {s['verdict']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="scifact,cranfield,reuters-labelled")
    ap.add_argument("--max-queries", type=int)
    ap.add_argument("--max-docs", type=int, help="a seeded cut of each collection (tiny runs)")
    ap.add_argument("--sparse", help="a third leg: the BM25 weights in this engine's sparse "
                                     "index (qdrant)")
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    import bm25s  # noqa: F401  (it sets DEBUG on its own logger when imported)

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    out = Path(args.out or tempfile.mkdtemp(prefix="rwb-bench-hybrid-"))
    print(f"CPU {_cpu()}, {os.cpu_count()} cores; load average before: "
          f"{tuple(round(x, 2) for x in os.getloadavg())}")
    for name in args.datasets.split(","):
        t0 = time.perf_counter()
        s = one(name, args, out)
        if isinstance(s, str):
            print(f"{name}: {s}")
            continue
        report(name, s, time.perf_counter() - t0)
    print(f"load average after: {tuple(round(x, 2) for x in os.getloadavg())}; run "
          f"directories under {out}")


if __name__ == "__main__":
    main()
