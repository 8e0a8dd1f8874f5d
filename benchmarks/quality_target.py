"""A target in the user's metric vs the recall-0.95 choice (issue 32 item 2), on rwb's judged
collections.

For each collection, one ``rwb sweep`` with ``target: {ndcg_non_inferior: M}`` (and
``target_recall: 0.95``) over HNSW builds (Faiss HNSW and hnswlib, each at every ``--M``):
per index, ``knob_recall`` (smallest ef_search whose recall@10 lower bound meets 0.95) beside
``knob_quality`` (smallest ef_search whose nDCG@10 against the qrels is non-inferior to exact
search by M, paired one-sided t-test, alpha 0.05), whether they agree, and each knob's cost:
distance computations per query (Faiss HNSW ``hnsw_stats.ndis``; hnswlib has no counter: "-")
and single-query p50 ms, measured in the same run. Then the share of indexes, and of
collections (first index), where the two choices disagree. Collections: ``scifact`` (the
``scifact-minilm`` manifest: 5,183 abstracts, 300 claims) and ``cranfield`` (1,400 abstracts,
225 queries, graded: gain = 5 - grade). Printed, never asserted; prints the CPU model and the
load average before and after.

``--scifact-cut N``: SciFact as a BEIR cut instead (``--n-queries`` seeded judged claims, 40 by
default, their cited abstracts and other abstracts up to N; retrieval.testing.byo.write_beir),
a small size that embeds in minutes on a busy machine.

Usage: python benchmarks/quality_target.py [--datasets scifact,cranfield] [--margin 0.005]
       [--M 8,16] [--n-queries N] [--scifact-cut N] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

DATASETS: dict[str, Any] = {
    "scifact": {"name": "scifact-minilm"},
    "cranfield": {"kind": "text", "collection": "cranfield", "metric": "cosine",
                  "dedupe": False},
}


def _cpu() -> str:
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    return cpu


def scifact_cut(folder: Path, n_queries: int, n_docs: int) -> dict[str, Any]:
    """A BEIR folder cut from SciFact (see the module doc), as a text dataset."""
    from retrieval.loaders.shared import load_scifact
    from retrieval.testing.byo import write_beir

    write_beir(load_scifact("test"), folder, n_queries=n_queries, n_docs=n_docs)
    return {"kind": "text", "collection": f"beir:{folder}"}


def spec_for(name: str, margin: float, ms: list[int], n_queries: int | None,
             dataset: dict[str, Any] | None = None) -> dict[str, Any]:
    if dataset is None:
        dataset = dict(DATASETS[name])
        if n_queries:
            dataset["n_queries"] = n_queries
    return {
        "name": f"quality-{name}", "dataset": dataset, "k": 10, "target_recall": 0.95,
        "target": {"ndcg_non_inferior": margin}, "warmup": 8, "batch_repeats": 1,
        "index_build": {"threads": 1},
        "indexes": [{"backend": b, "label": f"{b}-M{m}",
                     "build": {"M": m, "ef_construction": 100}, "search": {"ef_search": 10}}
                    for b in ("faiss-hnsw", "hnswlib") for m in ms],
        "tune": {"search_range": {"ef_search": [10, 256]}},
    }


def one(name: str, margin: float, ms: list[int], n_queries: int | None, out: Path,
        cut: int | None = None) -> dict[str, Any] | str:
    """The ``quality`` section of one collection's sweep, or why it could not run."""
    from retrieval.api import sweep
    from retrieval.errors import ConfigError, DataError

    try:
        dataset = (scifact_cut(out / "scifact-cut", n_queries or 40, cut)
                   if cut and name == "scifact" else None)
        run = sweep(spec_for(name, margin, ms, n_queries, dataset), out=out / name)
    except (ConfigError, DataError) as exc:
        return f"not measurable: {exc}"
    q = run.summary.quality
    return {} if q is None else q.model_dump(mode="json")


def _f(v: Any, digits: int = 4) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--datasets", default="scifact,cranfield")
    ap.add_argument("--margin", type=float, default=0.005)
    ap.add_argument("--M", default="8,16", help="HNSW M values, comma-separated")
    ap.add_argument("--n-queries", type=int, help="a seeded sample of each collection's queries")
    ap.add_argument("--scifact-cut", type=int, help="SciFact as a BEIR cut of N abstracts")
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    out = Path(args.out or tempfile.mkdtemp(prefix="rwb-bench-quality-"))
    ms = [int(m) for m in args.M.split(",")]
    print(f"CPU {_cpu()}, {os.cpu_count()} cores; load average before: {os.getloadavg()}")
    cases = disagree = 0
    per_dataset: dict[str, bool] = {}
    for name in args.datasets.split(","):
        res = one(name, args.margin, ms, args.n_queries, out, args.scifact_cut)
        if isinstance(res, str):
            print(f"{name}: {res}")
            continue
        print(f"\n{name}: exact-search nDCG@10 {_f(res.get('exact'))} over {res.get('n_queries')} "
              f"judged tuning queries; margin {args.margin}, {res.get('test')}")
        print(f"{'index':<18} {'knob_recall':>11} {'knob_quality':>12} {'agree':>5} "
              f"{'nDCG@10 r/q':>15} {'dist/query r/q':>17} {'p50 ms r/q':>15}")
        for label, doc in (res.get("by_index") or {}).items():
            r, q = doc.get("recall") or {}, doc.get("quality") or {}
            cases += 1
            disagree += not doc.get("agree")
            per_dataset.setdefault(name, not doc.get("agree"))
            print(f"{label:<18} {doc.get('knob_recall')!s:>11} "
                  f"{doc.get('knob_quality')!s:>12} {'yes' if doc.get('agree') else 'no':>5} "
                  f"{_f(r.get('value'), 3) + '/' + _f(q.get('value'), 3):>15} "
                  f"{_f(r.get('distance_computations'), 0) + '/' + _f(q.get('distance_computations'), 0):>17} "  # noqa: E501
                  f"{_f(r.get('p50_ms'), 3) + '/' + _f(q.get('p50_ms'), 3):>15}")
    if cases:
        n_ds = len(per_dataset)
        print(f"\ndisagree: {disagree} of {cases} indexes; {sum(per_dataset.values())} of "
              f"{n_ds} collections (first index)")
    print(f"load average after: {os.getloadavg()}; runs under {out}")


if __name__ == "__main__":
    main()
