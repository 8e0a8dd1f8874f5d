"""Adaptive per-query policies vs the tuned fixed setting (issue 32, item 3).

1. **Per-query ef on QQP MiniLM 137k** (``qqp-minilm``: 136.5k Quora questions + 1,000 held-out
   query questions, all-MiniLM-L6-v2 384-d, cosine). One Faiss HNSW index (``--M``,
   ``--efc``); the queries split in half (seeded): tuning / held-out. Each policy
   (``ada_ef`` with each pre-search feature, ``early_stop``) is fitted on the tuning half and
   run on the held-out half; the tuned fixed ``ef_search`` is the cheapest reaching the
   policy's mean AND 5th-percentile recall@10 on the same held-out queries (grid, then every
   integer between). Cost: distance computations per query (Faiss ``hnsw_stats.ndis``, every
   search the policy made, the pre-search included); ``if continued``: the last search alone,
   a lower bound for an engine that could continue a search instead of restarting it.
2. **Per-entry cache thresholds on the QQP pairs** (GPTCache's 80,854 labelled pairs; the
   design of ``rwb tune cache``: every question stored, ``text_b`` probes looked up with
   themselves left out, split by connected component): hit rate at the same false-hit upper
   bound (Wilson 95%, cap ``--max-false-hit`` on the tuning probes), per-entry thresholds vs
   the global threshold, on the held-out probes. Nearest neighbours here are exact (faiss
   IndexFlatIP on the MiniLM vectors), not a live Redis: ``rwb tune cache`` with ``adaptive:``
   measures the same on Redis's HNSW answers.

Printed, never asserted; with the CPU model and the load average before and after (the machine
should be otherwise idle). Full size (minutes, plus embedding 137k questions once if not
cached): ``python benchmarks/adaptive.py``. Tiny smoke run: ``python benchmarks/adaptive.py
--dataset synthetic-small --pairs 300``.

Usage: python benchmarks/adaptive.py [--dataset qqp-minilm] [--n N] [--seed S] [--queries Q]
       [--M 16] [--efc 200] [--pairs P] [--max-false-hit 0.05] [--skip-ef] [--skip-cache]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from typing import Any

import numpy as np

from retrieval.adaptive.cache import judge_entries, neighbourhood
from retrieval.adaptive.run import run_adaptive
from retrieval.adaptive.spec import AdaptiveSpec
from retrieval.groundtruth.exact import exact_knn
from retrieval.loaders.catalog import resolve_dataset
from retrieval.stats.sampling import seeded_subset
from retrieval.tune.decide import split_queries

K = 10


def cpu_line() -> str:
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                   cpu)
    return f"CPU {cpu}, {os.cpu_count()} cores"


def _n(v: Any, digits: int = 1) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


def per_query_ef(a: argparse.Namespace) -> None:
    from retrieval.engines.faiss.hnsw import FaissHnswIndex
    from retrieval.indexes.hnsw_common import HnswBuild

    ds = resolve_dataset(a.dataset)
    sampled = a.n is not None and a.n < ds.n_base
    rows = seeded_subset(ds.n_base, a.n, a.seed) if sampled else slice(None)
    base = np.asarray(ds.base[rows], dtype=np.float32)
    queries = np.asarray(ds.queries[: a.queries] if a.queries else ds.queries, dtype=np.float32)
    what = (f"a seeded sample (seed {a.seed}) of {len(base)} of its {ds.n_base} base vectors"
            if sampled else f"{len(base)} base vectors")
    print(f"\n[1] per-query ef: {ds.name}, {what}, {base.shape[1]}-d ({ds.metric}), "
          f"{len(queries)} queries, Faiss HNSW M {a.M} ef_construction {a.efc}; cost: "
          f"distance computations per query (Faiss hnsw_stats.ndis); quality: recall@{K} "
          f"against exact search on the same base; the tuned fixed ef_search matches the "
          f"policy's mean AND p5 recall@{K} on the held-out half")
    exact = exact_knn(base, queries, ds.metric, K).ids
    index = FaissHnswIndex(base.shape[1], ds.metric, HnswBuild(M=a.M, ef_construction=a.efc),
                           seed=0, threads=1)
    index.set_build_threads(a.threads)
    t0 = time.perf_counter()
    index.build(base)
    print(f"built in {time.perf_counter() - t0:.1f} s")
    split = split_queries(len(queries), 0.5, 0)
    print(f"{'policy':<11}{'feature':<8}{'cost':>9}{'if cont.':>9}{'mean':>8}{'p5':>7}"
          f"{'p50 ms':>8}{'fixed ef':>9}{'fixed':>9}{'ratio':>7}  winner")
    runs = [("ada_ef", f) for f in ("gap", "first", "ndis")] + [("early_stop", "-")]
    for policy, feature in runs:
        spec = AdaptiveSpec(policies=[policy], pre_ef=a.pre_ef, feature=feature
                            if feature != "-" else "gap", target_mean=a.target)
        (e,), _ = run_adaptive(spec, index, queries, exact, K, split.tune, split.heldout,
                               meta={"label": "faiss-hnsw"})
        vs = e["vs_fixed"]
        print(f"{policy:<11}{feature:<8}{_n(e['cost']):>9}"
              f"{_n(e['detail'].get('cost_if_continued')):>9}{e['mean']:>8.4f}{e['p5']:>7.3f}"
              f"{e['p50_ms']:>8.3f}{vs.get('value') or '-':>9}{_n(vs.get('cost')):>9}"
              f"{_n(vs.get('ratio'), 3):>7}  {vs['winner']}")
        print(f"    {vs['verdict']}")


def exact_neighbours(vecs: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    import faiss

    index = faiss.IndexFlatIP(vecs.shape[1])
    index.add(vecs)
    sims, rows = index.search(queries, k)
    return rows, 1.0 - sims


def cache_thresholds(a: argparse.Namespace) -> None:
    from retrieval.cache.fill import embed_questions
    from retrieval.cache.spec import parse_cache_spec
    from retrieval.cache.tune import choose_threshold, design_probes, qqp_labels

    spec = parse_cache_spec({"pairs": {"limit": a.pairs, "seed": 0} if a.pairs else {},
                             "tuning": {"max_false_hit": a.max_false_hit}})
    labels = qqp_labels()
    design = design_probes(labels, spec)
    print(f"\n[2] per-entry cache thresholds: {design.info['n_pairs']} pairs, "
          f"{design.info['n_stored']} stored questions, {design.info['n_probes']} probes "
          f"({design.info['n_heldout']} held out); cap {a.max_false_hit} on the Wilson 95% "
          f"upper bound of the tuning false-hit rate")
    vecs = embed_questions(labels, design.stored, spec)
    stored = design.stored
    rows, d = exact_neighbours(vecs[stored], vecs[design.probes], 2)
    qid = stored[rows]
    first_other = np.where(qid[:, 0] != design.probes, 0, 1)
    nn = qid[np.arange(len(qid)), first_other]
    nd = d[np.arange(len(qid)), first_other].astype(np.float64)
    correct = design.is_duplicate(design.probes, nn)
    entries = np.unique(nn)
    erows, ed = exact_neighbours(vecs[stored], vecs[entries], 3)
    feature = neighbourhood(design.probes, nn, entries, stored[erows], ed.astype(np.float64))
    sweep = choose_threshold(nd, correct, design, spec)
    g = None if sweep.threshold is None else sweep.threshold.cosine_distance
    t = spec.tuning
    grid = np.round(np.arange(round(t.max_threshold / t.grid_step) + 1) * t.grid_step, 10)
    print(f"global threshold {g} (cosine distance)")
    print("hit rate and false-hit rate on the held-out probes, per-entry vs global; bound: "
          "Wilson 95% upper bound of the held-out false-hit rate; worst: the largest false-hit "
          "rate of one entry-feature bin (p5 is null for the cache: docs/adaptive.md)")
    print(f"{'bins':>5}{'hit rate':>10}{'global':>9}{'false':>8}{'global':>9}{'bound':>8}"
          f"{'global':>9}{'worst':>8}{'global':>9}  winner")
    for bins in (2, 4, 8):
        e = judge_entries(nd, correct, feature, design.heldout, grid, g,
                          max_false_hit=t.max_false_hit, confidence=t.confidence,
                          bound=t.bound, bins=bins)
        if e.get("skipped"):
            print(f"{bins:>5}  {e['skipped']}")
            continue
        p, f = e["detail"]["heldout"], e["detail"]["fixed_heldout"]
        print(f"{bins:>5}{p['hit_rate']:>10.4f}{f['hit_rate']:>9.4f}{p['false_hit_rate']:>8.4f}"
              f"{f['false_hit_rate']:>9.4f}{p['false_hit_upper_bound']:>8.4f}"
              f"{f['false_hit_upper_bound']:>9.4f}"
              f"{_n(e['detail']['worst_bin_false_hit_rate'], 4):>8}"
              f"{_n(e['detail']['fixed_worst_bin_false_hit_rate'], 4):>9}  "
              f"{e['vs_fixed']['winner']}")
        print(f"      thresholds {[round(x, 4) for x in e['detail']['thresholds']]} by entry "
              f"neighbourhood edges {[round(x, 4) for x in e['detail']['edges']]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="qqp-minilm")
    ap.add_argument("--n", type=int, default=None,
                    help="a seeded sample of N base vectors (default: all)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the --n sample")
    ap.add_argument("--queries", type=int, default=None, help="first Q queries only")
    ap.add_argument("--M", type=int, default=16)
    ap.add_argument("--efc", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2, help="build threads")
    ap.add_argument("--pre-ef", type=int, default=16)
    ap.add_argument("--target", type=float, default=0.95, help="ada_ef's mean recall@10 aim")
    ap.add_argument("--pairs", type=int, default=None, help="a seeded subset of the pairs")
    ap.add_argument("--max-false-hit", type=float, default=0.05)
    ap.add_argument("--skip-ef", action="store_true")
    ap.add_argument("--skip-cache", action="store_true")
    a = ap.parse_args()
    print(f"{cpu_line()}; load average before: {os.getloadavg()}")
    t0 = time.perf_counter()
    if not a.skip_ef:
        per_query_ef(a)
    if not a.skip_cache:
        cache_thresholds(a)
    print(f"\nwall {time.perf_counter() - t0:.1f} s; load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
