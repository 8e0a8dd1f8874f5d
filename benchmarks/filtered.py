"""Filtered search (issue: Filtered search, Performance). Two ratios, measured in one run:

1. Filtered exact ground truth (rwb: each distinct filter's matching rows gathered once and
   searched with faiss.knn for all its queries) vs a plain numpy masked brute force (per query:
   distances to every base vector, non-matching ones masked to +inf, argpartition)
                                                                              goal >= 5x faster
2. Per-bucket choice vs one fixed setting: a target sweep picks the cheapest strategy + knob per
   selectivity bucket; the best single fixed setting is, among the (index, strategy, knob)
   settings that meet the target in every bucket (each strategy's largest chosen knob), the one
   with the lowest worst-bucket p95. Both are re-timed on the held-out queries, interleaved;
   reported: p95 ratio fixed / chosen per bucket (goal >= 2x in at least one bucket, at the 1%
   bucket on Reuters) and both held-out recall lower bounds.

Data: the Reuters-21578 labelled set of sweeps/filtered-reuters.yaml (MiniLM vectors, embedded
once and cached) or, with ``--synthetic``, a small synthetic set (a quick proof that it runs).
Printed, never asserted: speed is not a test.

Usage: python benchmarks/filtered.py [--synthetic] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import numpy as np

from retrieval.evaluation import Evaluator
from retrieval.specfile import with_overrides
from retrieval.tune.bucket_summary import bind_spec_buckets
from retrieval.tune.decide import lower_bound, split_queries
from retrieval.tune.filterbench import FilteredBench
from retrieval.tune.runner import load_vectors
from retrieval.tune.spec import checked_entries, load_spec, parse_spec
from retrieval.tune.sweep import run_sweep
from retrieval.tune.units import entry_labels
from retrieval.workload.truth import filtered_ground_truth

SYNTHETIC = {
    "name": "filtered-bench-synthetic",
    "dataset": {"kind": "synthetic", "n": 5000, "dim": 32, "n_queries": 100, "n_clusters": 16,
                "attributes": True},
    "k": 10, "target_recall": 0.9, "warmup": 5, "batch_repeats": 1,
    "indexes": [{"backend": "faiss-flat"},
                {"backend": "hnswlib", "build": {"M": 16, "ef_construction": 100},
                 "search": {"ef_search": 64}},
                {"backend": "faiss-ivf", "build": {"nlist": 64}, "search": {"nprobe": 8}}],
    "filters": {"selectivities": [0.01, 0.1, 0.5], "attribute": "clustered",
                "strategies": ["engine", "prefilter", "postfilter"], "overfetch_max": 64},
    "tune": {"strategy": "target", "heldout_fraction": 0.5},
}


def numpy_masked(base: np.ndarray, queries: np.ndarray, metric: str, bucket: Any,
                 k: int) -> np.ndarray:
    """The plain baseline: per query, every distance, masked, argpartition."""
    b = base if metric != "cosine" else base / np.linalg.norm(base, axis=1, keepdims=True)
    out = np.full((len(queries), k), -1, dtype=np.int64)
    for i, q in enumerate(queries):
        mask = bucket.filter_for(i).mask
        if metric == "l2":
            d = ((b - q) ** 2).sum(axis=1)
        else:
            qq = q / np.linalg.norm(q) if metric == "cosine" else q
            d = -(b @ qq)
        d = np.where(mask, d, np.inf)
        m = min(k, int(mask.sum()))
        top = np.argpartition(d, m - 1)[:m]
        out[i, :m] = top[np.argsort(d[top], kind="stable")]
    return out


def gt_ratio(ds: Any, buckets: list[Any], k: int, rounds: int) -> None:
    print("1. filtered ground truth: rwb (faiss.knn per distinct filter) vs numpy masked")
    for b in buckets:
        ours, base = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            gt = filtered_ground_truth(ds.base, ds.queries, ds.metric, b, k)  # no cache
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ref = numpy_masked(ds.base, ds.queries, ds.metric, b, k)
            base.append(time.perf_counter() - t0)
        agree = float((np.sort(gt.ids, 1) == np.sort(ref, 1)).mean())
        r = statistics.median(base) / statistics.median(ours)
        print(f"   {b.name:>24}  sel {b.selectivity:.4f}  {len(b.filters):>4} filters  rwb "
              f"{statistics.median(ours) * 1e3:8.1f} ms  numpy {statistics.median(base) * 1e3:8.1f}"
              f" ms  ratio {r:6.1f}x  (goal >= 5)  ids agree {agree:.4f}")


def fixed_settings(choices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (label, strategy) feasible in every bucket: its largest chosen knob."""
    out = []
    keys = {(c["label"], c["strategy"]) for c in choices}
    for label, strategy in sorted(keys):
        mine = [c for c in choices if c["label"] == label and c["strategy"] == strategy]
        if not all(c["chosen"] for c in mine):
            continue
        top = max(mine, key=lambda c: next(iter(c["knob"].values()), 0) if c["knob"] else 0)
        out.append({"label": label, "strategy": strategy, "search": top["search"],
                    "overfetch": top.get("overfetch"), "knob": top["knob"]})
    return out


def choice_ratio(spec: Any, ds: Any, summary: dict[str, Any], rounds: int) -> None:
    entries = dict(zip(entry_labels(spec), checked_entries(spec)))
    split = split_queries(ds.n_queries, spec.tune.heldout_fraction, spec.seed)
    fixed = fixed_settings(summary["choices"])
    ops = {o["bucket"]: o for o in summary["operating_points"] if o.get("strategy")}
    with Evaluator.for_spec(spec, ds, None) as ev:
        buckets = bind_spec_buckets(spec, ds, ev.gt.ids[:, 0])
        bench = FilteredBench(ev, buckets)

        def p95(label: str, strategy: str, search: dict[str, Any], overfetch: Any,
                b: Any) -> tuple[float, float]:
            e = entries[label]
            built = ev.build(e.backend, e.build(e.build_grid[0]))
            ps, lbs = [], []
            for _ in range(rounds):
                p = bench.measure(built, search, strategy, b, label=label, overfetch=overfetch,
                                  modes=("single",), query_idx=split.heldout)
                ps.append(float(np.percentile(p.latency_ms, 95)))
                lbs.append(lower_bound(p.per_query_recall, spec.k, spec.tune.confidence,
                                       spec.seed))
            return statistics.median(ps), min(lbs)

        table = {(f["label"], f["strategy"]): {b.name: p95(f["label"], f["strategy"],
                                                           f["search"], f["overfetch"], b)
                                               for b in buckets} for f in fixed}
        if not table:
            print("2. no single fixed setting meets the target in every bucket")
            return
        best = min(table, key=lambda key: max(v[0] for v in table[key].values()))
        f = next(x for x in fixed if (x["label"], x["strategy"]) == best)
        print(f"2. per-bucket choice vs the best single fixed setting {best[0]} / {best[1]} "
              f"{f['knob'] or ''} (lowest worst-bucket p95), held-out queries")
        for b in buckets:
            o = ops.get(b.name)
            if o is None:
                print(f"   {b.name:>24}  no operating point")
                continue
            c95, clb = p95(o["label"], o["strategy"], o["search"], o.get("overfetch"), b)
            f95, flb = table[best][b.name]
            print(f"   {b.name:>24}  sel {b.selectivity:.4f}  chosen {o['label']}/{o['strategy']}"
                  f" {o.get('knob') or ''} p95 {c95:.3f} ms (lb {clb:.3f})  fixed p95 {f95:.3f} "
                  f"ms (lb {flb:.3f})  ratio {f95 / c95:5.2f}x  (goal >= 2 in one bucket)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", action="store_true", help="small synthetic set (quick proof)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.synthetic:
        spec = parse_spec(SYNTHETIC)
    else:
        spec = load_spec("sweeps/filtered-reuters.yaml")
        spec = with_overrides(spec, tune={**spec.tune.model_dump(), "strategy": "target"})
    ds = load_vectors(spec)
    with Evaluator.for_spec(spec, ds, None) as ev:
        buckets = bind_spec_buckets(spec, ds, ev.gt.ids[:, 0])
    gt_ratio(ds, buckets, spec.k, args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        summary = run_sweep(spec, f"{tmp}/run", dataset=ds).summary
    choice_ratio(spec, ds, summary, args.rounds)


if __name__ == "__main__":
    main()
