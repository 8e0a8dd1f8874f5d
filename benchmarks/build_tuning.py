"""Build parameters at a fraction of the builds (issue 33): ``tune.build_search: derived`` vs
``full`` vs raw Faiss code, side by side in one run.

For a Faiss HNSW grid (M x ef_construction; default the issue's M 4/8/16/32/48 x efC
32/64/128/200/400, ``--m`` and ``--efc`` to change it) and recall@10 target 0.95 (the 95%
lower bound over the tuning half of the queries, as every rwb sweep judges it):

(a) ``rwb sweep`` with ``build_search: full``: every build of the grid built in full;
(b) ``rwb sweep`` with ``build_search: derived``: the builds below the largest ef_construction
    of their M are dominated (not built, ``tune.dominated_builds: skip``), the largest M is built
    and the smaller ones are derived by pruning (retrieval.engines.faiss.derive), the answer's
    build built for real and checked (its shortcut error printed);
(c) raw library code: a Faiss build of every grid point + the ann-benchmarks 9-value ef grid,
    every query searched at every value, the cheapest (by batch ms/query) meeting the target by
    MEAN recall (what a hand-written harness does).

Printed, never asserted: build seconds of (a) and (b) (goal: (b) <= 1/3 of (a)), whether the
answers agree (the same (build, ef), or (b)'s p95 within 5% of (a)'s), where rwb's wall
seconds went (building, searching, the rest) and the pruning kernel's compile or cache load,
end-to-end seconds of (b) vs (c) (goal: >= 3x cheaper), the index cache off and the same build
threads on every side; the CPU model and load average before and after. Data: ``--qqp`` the
QQP MiniLM set (~137k x 384, cosine; needs ../shared/data and its embeddings), else synthetic
clustered vectors (``--n``, default 100k x 96).

(b) runs with ``tune.concurrent_builds`` (``--concurrent``, default auto: the sources built at
once, build threads split between them) and optionally ``tune.query_subset``
(``--query-subset 0.2``) and ``tune.build_screen`` (``--screen 0.1``); ``--ivf 256,1024`` adds
a faiss-ivf nlist grid to (a) and (b) (derived by hierarchical merges on (b)). Build seconds
are printed as ``build_cost_s`` (sum of each build's own seconds), ``build_wall_s`` and
``build_cpu_s``.

Usage: python benchmarks/build_tuning.py [--qqp] [--n 100000] [--m 8,16,32] [--efc 64,200]
       [--skip-full] [--skip-raw] [--compare M=8,ef_construction=200,ef_search=33]
       [--threads 2] [--concurrent auto] [--query-subset 1.0] [--screen 0.1] [--ivf 256,1024]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.groundtruth.exact import ground_truth
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

TARGET = 0.95
ANN_BENCHMARKS_EF = (10, 20, 40, 80, 120, 200, 400, 600, 800)


def clustered(n: int, nq: int, d: int = 96, seed: int = 0) -> VectorDataset:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(max(10, n // 100), d)).astype(np.float32) * 2.0
    base = (c[rng.integers(0, len(c), n)] + rng.normal(size=(n, d))).astype(np.float32)
    q = (c[rng.integers(0, len(c), nq)] + rng.normal(size=(nq, d))).astype(np.float32)
    return VectorDataset.from_arrays(base, q, "l2", name=f"blobs-{n}x{d}")


#: tune options of the derived side (b) (--concurrent, --query-subset) and the IVF grid (--ivf)
EXTRA: dict[str, Any] = {"tune": {}, "ivf": []}


def spec(mode: str, ms: list[int], efcs: list[int], threads: int) -> dict[str, Any]:
    indexes: list[dict[str, Any]] = [
        {"backend": "faiss-hnsw", "build": {"M": ms, "ef_construction": efcs},
         "search": {"ef_search": [10]}}]
    if EXTRA["ivf"]:
        indexes.append({"backend": "faiss-ivf", "build": {"nlist": EXTRA["ivf"]},
                        "search": {"nprobe": [1]}})
    return {
        "name": f"build-tuning-{mode}", "dataset": "given", "k": 10, "seed": 0,
        "threads": threads, "target_recall": TARGET,
        "indexes": indexes,
        "tune": {"build_search": mode, "search_range": {"ef_search": [10, 800]},
                 **(EXTRA["tune"] if mode == "derived" else {})},
        "index_build": {"cache": False, "threads": threads},
    }


def run_rwb(ds: VectorDataset, mode: str, ms: list[int], efcs: list[int], threads: int,
            out: Path) -> tuple[dict[str, Any], float]:
    s = parse_spec(spec(mode, ms, efcs, threads), source=f"build_tuning-{mode}")
    t0 = time.perf_counter()
    res = run_sweep(s, out / mode, dataset=ds)
    return res.summary, time.perf_counter() - t0


def run_raw(ds: VectorDataset, ms: list[int], efcs: list[int], threads: int
            ) -> tuple[dict[str, Any] | None, float, float]:
    """Raw Faiss: build every grid point, search the 9-value grid; returns the cheapest point
    meeting the target by mean recall, the wall seconds and the build seconds."""
    import faiss

    faiss.omp_set_num_threads(threads)
    x, q = faiss_inputs(ds)
    truth = ground_truth(ds, 10).ids
    t0, build_s, best = time.perf_counter(), 0.0, None
    metric = faiss.METRIC_INNER_PRODUCT if ds.metric in ("cosine", "ip") else faiss.METRIC_L2
    for m in ms:
        for efc in efcs:
            tb = time.perf_counter()
            index = faiss.IndexHNSWFlat(x.shape[1], m, metric)
            index.hnsw.efConstruction = efc
            index.add(x)
            build_s += time.perf_counter() - tb
            for ef in ANN_BENCHMARKS_EF:
                index.hnsw.efSearch = ef
                ts = time.perf_counter()
                _, ids = index.search(q, 10)
                ms_q = (time.perf_counter() - ts) * 1000 / len(q)
                rec = float(np.mean([len(set(a) & set(b)) / 10
                                     for a, b in zip(ids, truth, strict=True)]))
                if rec >= TARGET and (best is None or ms_q < best["ms_per_query"]):
                    best = {"M": m, "ef_construction": efc, "ef_search": ef, "recall": rec,
                            "ms_per_query": ms_q}
    return best, time.perf_counter() - t0, build_s


def faiss_inputs(ds: VectorDataset) -> tuple[np.ndarray, np.ndarray]:
    """Base and queries as contiguous float32 for raw Faiss (unit length for cosine)."""
    import faiss

    x = np.ascontiguousarray(ds.base, dtype=np.float32)
    q = np.ascontiguousarray(ds.queries, dtype=np.float32)
    if ds.metric == "cosine":
        x, q = x.copy(), q.copy()
        faiss.normalize_L2(x)
        faiss.normalize_L2(q)
    return x, q


#: rounds of the side-by-side re-timing of the two answers (each round: every query alone, on
#: each answer in turn)
RETIME_ROUNDS = 5


def retime(ds: VectorDataset, answers: list[tuple[dict[str, Any], dict[str, Any]]],
           threads: int) -> list[float]:
    """p95 single-query ms of each ``(build, search)`` answer (Faiss HNSW built again with
    ``threads`` build threads; searched on one thread, every query alone, the answers
    alternating round by round so both see the same machine load)."""
    import faiss

    x, q = faiss_inputs(ds)
    metric = faiss.METRIC_INNER_PRODUCT if ds.metric in ("cosine", "ip") else faiss.METRIC_L2
    built = []
    faiss.omp_set_num_threads(threads)
    for build, search in answers:
        index = faiss.IndexHNSWFlat(x.shape[1], int(build["M"]), metric)
        index.hnsw.efConstruction = int(build["ef_construction"])
        index.add(x)
        built.append((index, faiss.SearchParametersHNSW(efSearch=int(search["ef_search"]))))
    faiss.omp_set_num_threads(1)
    times: list[list[float]] = [[] for _ in answers]
    for _ in range(RETIME_ROUNDS):
        for i, (index, params) in enumerate(built):
            for r in range(len(q)):
                t = time.perf_counter()
                index.search(q[r:r + 1], 10, params=params)
                times[i].append((time.perf_counter() - t) * 1000)
    faiss.omp_set_num_threads(threads)
    return [float(np.percentile(t, 95)) for t in times]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qqp", action="store_true")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--m", default="4,8,16,32,48")
    ap.add_argument("--efc", default="32,64,128,200,400")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-full", action="store_true", help="skip (a), the costliest side")
    ap.add_argument("--skip-raw", action="store_true", help="skip (c), raw Faiss code")
    ap.add_argument("--compare", default="",
                    help="with --skip-full: re-time (b)'s answer side by side against this "
                    "answer of an earlier (a), e.g. M=8,ef_construction=200,ef_search=33")
    ap.add_argument("--concurrent", default="auto",
                    help="tune.concurrent_builds of (b): 1, N or auto (default)")
    ap.add_argument("--query-subset", type=float, default=1.0,
                    help="tune.query_subset of (b) (default 1: every tuning query)")
    ap.add_argument("--screen", type=float, default=0.0,
                    help="tune.build_screen fraction of (b) (e.g. 0.1; default 0: no screening)")
    ap.add_argument("--ivf", default="", help="also a faiss-ivf nlist grid on (a) and (b), "
                    "e.g. 256,1024 (derived by hierarchical merges on (b); raw (c): HNSW only)")
    a = ap.parse_args()
    EXTRA["tune"] = {"concurrent_builds": a.concurrent if a.concurrent == "auto"
                     else int(a.concurrent), "query_subset": a.query_subset,
                     **({"build_screen": {"fraction": a.screen}} if a.screen > 0 else {})}
    EXTRA["ivf"] = [int(v) for v in a.ivf.split(",") if v]
    ms = [int(v) for v in a.m.split(",")]
    efcs = [int(v) for v in a.efc.split(",")]
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                   cpu)
    print(f"CPU {cpu}, {os.cpu_count()} cores; load average before: {os.getloadavg()}")
    if a.qqp:
        from retrieval.loaders.catalog import resolve_dataset

        ds = resolve_dataset("qqp-minilm")
    else:
        ds = clustered(a.n, a.queries)
    print(f"data {ds.name}: {ds.n_base} x {ds.dim}, {ds.n_queries} queries, {ds.metric}; "
          f"grid M {ms} x ef_construction {efcs}; {a.threads} build/search threads; target "
          f"recall@10 lower bound {TARGET}")
    out = Path(tempfile.mkdtemp(prefix="rwb-build-tuning-"))
    from retrieval.engines.faiss.derive import jit_warm_up

    print(f"pruning kernel compiled or loaded from numba's cache in {jit_warm_up():.1f} s "
          "(once per process, before (b) starts; a first run on a machine compiles)")
    derived, derived_wall = run_rwb(ds, "derived", ms, efcs, a.threads, out)
    raw, raw_wall, raw_build = (None, math.nan, math.nan) if a.skip_raw else run_raw(
        ds, ms, efcs, a.threads)
    rows = [("derived (b)", derived, derived_wall)]
    if not a.skip_full:
        full, full_wall = run_rwb(ds, "full", ms, efcs, a.threads, out)
        rows.insert(0, ("full (a)", full, full_wall))
    print(f"\n{'path':<14}{'builds full':>12}{'derived':>9}{'build s':>10}{'wall s':>9}  answer")
    for name, s, wall in rows:
        ans = s.get("answer") or {}
        print(f"{name:<14}{s['builds_full']:>12}{s['builds_derived']:>9}"
              f"{s['build_cost_s']:>10.1f}{wall:>9.1f}  {ans.get('build')} {ans.get('search')} "
              f"p95 {ans.get('p95_ms')}")
    if not a.skip_raw:
        print(f"{'raw (c)':<14}{len(ms) * len(efcs):>12}{0:>9}{raw_build:>10.1f}"
              f"{raw_wall:>9.1f}  {raw}")
    for name, s, wall in rows:
        w = s.get("this_worker") or {}
        parts = ", ".join(f"{k} {v:.1f}" for k, v in w.items()
                          if k.endswith("_s") and isinstance(v, float))
        print(f"{name}: wall {wall:.1f} s = {parts}; dominated builds "
              f"{s.get('builds_dominated', 0)}")
        print(f"{name}: build_cost_s {s['build_cost_s']:.1f} (sum per build), build_wall_s "
              f"{s['build_wall_s']:.1f}, build_cpu_s {s['build_cpu_s']:.1f}, "
              f"{s['concurrent_builds']} build(s) at once")
    scr = derived.get("build_screen")
    if scr:
        print(f"build screen at N={scr['at_n']:,}: {scr['screened']} candidates, "
              f"{scr['screen_build_s']:.1f} s building on the sample; dropped: "
              + (", ".join(f"{p['label']} {p['build']} ({p['reason']})"
                           for p in derived.get("pruned") or []) or "none"))
    sub = derived.get("query_subset")
    if sub:
        print(f"query subset {sub['share']}: {sub['query_evals']} of {sub['query_evals_all']} "
              f"query searches (saved {100 * (sub['saved'] or 0):.0f}%), answers changed "
              f"{sub['answers_changed']}/{sub['units']}")
    dans = derived.get("answer") or {}
    for check in dans.get("checks") or ([dans["check"]] if dans.get("check") else []):
        print(f"\nshortcut check of {check['build']} (derived from {check['derived_from']}): "
              f"derived recall {check['recall_derived']:.4f} vs real {check['recall_real']:.4f} "
              f"at {check['search']} (error {check['shortcut_error']:+.4f}); after the check "
              f"{check['search_after_check']} meets: {check['meets_after_check']}; real build "
              f"{check['real_build_s']:.1f} s")
    if dans.get("checks"):
        print(f"answer after re-ranking: {dans.get('build')} {dans.get('search')} (re-ranked: "
              f"{dans.get('reranked')}; checked for real: {dans.get('check') is not None})")
    if not a.skip_full:
        full = rows[0][1]
        ratio = derived["build_cost_s"] / max(full["build_cost_s"], 1e-9)
        fa, da = full.get("answer") or {}, derived.get("answer") or {}
        same = fa.get("build") == da.get("build") and fa.get("search") == da.get("search")
        p95 = (None if not fa.get("p95_ms") or da.get("p95_ms") is None
               else da["p95_ms"] / fa["p95_ms"])
        print(f"build seconds derived / full: {ratio:.2f} (goal <= 0.33); same (build, ef): "
              f"{same}; derived answer's p95 / full answer's: "
              f"{'n/a' if p95 is None else f'{p95:.2f}'} (each as its sweep measured it; goal: "
              f"same, or <= 1.05)")
        if not same and fa.get("build") and da.get("build"):
            side = retime(ds, [(fa["build"], fa["search"]), (da["build"], da["search"])],
                          a.threads)
            print(f"re-timed side by side (both answers built again with Faiss, every query "
                  f"alone, the two alternating, {RETIME_ROUNDS} rounds): p95 full answer "
                  f"{side[0]:.4f} ms, derived answer {side[1]:.4f} ms: "
                  f"{side[1] / side[0]:.2f} (goal <= 1.05)")
    if a.skip_full and a.compare and dans.get("build"):
        given = {k: int(v) for k, v in (kv.split("=") for kv in a.compare.split(","))}
        other = ({"M": given["M"], "ef_construction": given["ef_construction"]},
                 {"ef_search": given["ef_search"]})
        side = retime(ds, [other, (dans["build"], dans["search"])], a.threads)
        print(f"re-timed side by side against the given answer {a.compare} (both built again "
              f"with Faiss, every query alone, alternating, {RETIME_ROUNDS} rounds): p95 given "
              f"{side[0]:.4f} ms, derived answer {side[1]:.4f} ms: {side[1] / side[0]:.2f} "
              "(goal <= 1.05)")
    if not a.skip_raw:
        print(f"end to end raw / derived: {raw_wall / max(derived_wall, 1e-9):.2f}x "
              "(goal >= 3x)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
