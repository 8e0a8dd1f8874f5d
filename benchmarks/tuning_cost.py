"""What tuning costs: `target` search vs grids, on real MiniLM vectors (issue: Tuning, Performance).

Dataset qqp-minilm-20k (20,000 Quora questions + 500 held-out queries, all-MiniLM-L6-v2 384-d,
cosine); recall@10 target 0.95 judged, as in `rwb sweep`, by the 95% bootstrap lower bound over
the tuning half of the queries. For hnswlib (M 16, ef_construction 200; ef_search in [10, 800])
and faiss-ivf (IVF256,Flat; nprobe in [1, 256]):

1. exactness: `target` must find exactly the smallest knob value a *dense* grid (every integer
   of the range, same measurement and bound) finds, within ceil(log2(range)) + 2 evaluations;
2. time of `rwb sweep --strategy target` vs `--strategy grid` with the ann-benchmarks grid
   (9 values per build, every query timed), both through the same code: the evaluation time
   (goal: target >= 3x cheaper) and end to end, with the one build they share and the Optuna
   storage;
3. evaluations of `target` vs Faiss `ParameterSpace.explore` on the same IVF index (goal: no
   more), over explore's own candidate values (powers of two) and over every integer.

Printed, never asserted. Usage: python benchmarks/tuning_cost.py [--target 0.95]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.evaluation import Evaluator
from retrieval.loaders.catalog import resolve_dataset
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import split_queries
from retrieval.tune.measure import Measurer
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep
from retrieval.tune.target import solve

DATASET = "qqp-minilm-20k"
CASES: dict[str, dict[str, Any]] = {
    "hnswlib": {
        "build": {"M": 16, "ef_construction": 200},
        "knob": "ef_search",
        "range": (10, 800),
        # ann-benchmarks' hnswlib query arguments
        "grid": [10, 20, 40, 80, 120, 200, 400, 600, 800],
    },
    "faiss-ivf": {
        "build": {"nlist": 256, "encoding": "flat"},
        "knob": "nprobe",
        "range": (1, 256),
        "grid": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    },
}


def spec_for(backend: str, case: dict[str, Any], target: float, strategy: str) -> Any:
    knob = case["knob"]
    return parse_spec({
        "name": f"cost-{backend}-{strategy}",
        "dataset": DATASET,
        "k": 10,
        "target_recall": target,
        "indexes": [{"backend": backend, "build": case["build"], "search": {knob: case["grid"]}}],
        "tune": {"strategy": strategy, "search_range": {knob: list(case["range"])}},
    }, source="tuning_cost")


def timed_sweep(
    ds: Any, backend: str, case: dict[str, Any], target: float, strategy: str
) -> dict[str, Any]:
    """`rwb sweep` end to end (dataset already loaded), with the worker's own time accounting:
    build_s (the one index build), measure_s (every evaluation, the chosen config's full timing
    and held-out pass), other_s (Optuna storage, planning)."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = run_sweep(spec_for(backend, case, target, strategy), Path(tmp) / "run", dataset=ds)
        wall = time.perf_counter() - t0
    build = res.summary["builds"][0]
    chosen = build["chosen"]
    return {
        **res.summary["this_worker"],
        "wall_s": wall,
        "evaluations": build["evaluations"],
        "value": None if chosen is None else chosen["search"][case["knob"]],
    }


def dense_and_explore(ds: Any, backend: str, case: dict[str, Any], target: float) -> dict:
    """Dense grid (every integer of the range) and, for IVF, Faiss ParameterSpace.explore."""
    split = split_queries(ds.n_queries, 0.5, 0)
    knob, (low, high) = case["knob"], case["range"]
    out: dict[str, Any] = {}
    with Evaluator(ds, 10, threads=1, seed=0, batch_repeats=1) as ev:
        built = ev.build(backend, case["build"])
        m = Measurer(ev, split, ["batch"], target, ConfidenceSpec(), 0)
        cache: dict[int, bool] = {}

        def meets(v: int) -> bool:
            if v not in cache:
                cache[v] = bool(m.probe(built, {knob: v}).meets)
            return cache[v]

        t0 = time.perf_counter()
        dense = [v for v in range(low, high + 1) if meets(v)]
        out["dense_s"] = time.perf_counter() - t0
        out["dense_value"] = dense[0] if dense else None
        out["dense_evaluations"] = high - low + 1
        ups = [v for v in range(low, high) if cache[v] and not cache[v + 1]]
        out["non_monotone_steps"] = len(ups)
        # target over the dense grid's own answers (a pure replay: exactness of the algorithm)
        replay = solve(low, high, meets)
        out["replay_value"], out["replay_evaluations"] = replay.value, replay.evaluations
        if backend == "faiss-ivf":
            out.update(explore(ds, built.index, split.tune, m.ev.gt.ids, target, case, meets))
    return out


def explore(ds: Any, index: Any, tune_idx: np.ndarray, gt_ids: np.ndarray, target: float,
            case: dict[str, Any], meets: Any) -> dict[str, Any]:
    import faiss

    from retrieval.data import normalize_rows

    faiss.omp_set_num_threads(1)
    lib = index._index  # the faiss index rwb built and measured (same object)
    xq = np.ascontiguousarray(ds.queries[tune_idx], dtype=np.float32)
    if ds.metric == "cosine":
        xq = normalize_rows(xq)
    gt = np.ascontiguousarray(gt_ids[tune_idx, :10], dtype=np.int64)
    crit = faiss.IntersectionCriterion(len(xq), 10)
    crit.set_groundtruth(None, gt)
    ps = faiss.ParameterSpace()
    ps.initialize(lib)
    ps.verbose = 0
    t0 = time.perf_counter()
    ops = ps.explore(lib, xq, crit)
    wall = time.perf_counter() - t0
    n = ops.all_pts.size()
    pts = [ops.all_pts.at(i) for i in range(n)]
    ok = [int(p.key.split("=")[1]) for p in pts if p.perf >= target and p.key.startswith("nprobe")]
    # target over explore's own candidates (the same values, by position)
    values = sorted({int(p.key.split("=")[1]) for p in pts if p.key.startswith("nprobe")}
                    | set(case["grid"]))
    listed = solve(0, len(values) - 1, lambda i: meets(values[i]))
    return {
        "explore_evaluations": n,
        "explore_s": wall,
        "explore_value_mean": min(ok) if ok else None,
        "explore_candidates": values,
        "target_on_candidates_evaluations": listed.evaluations,
        "target_on_candidates_value": None if listed.value is None else values[listed.value],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--backends", nargs="*", default=list(CASES))
    ap.add_argument("--skip-dense", action="store_true",
                    help="skip the dense-grid exactness check (minutes) and explore")
    args = ap.parse_args()
    ds = resolve_dataset(DATASET)
    print(f"dataset {ds.name}: {ds.n_base} x {ds.dim} ({ds.metric}), {ds.n_queries} queries "
          f"(half for tuning); target recall@10 lower bound >= {args.target}; threads=1")
    for backend in args.backends:
        case = CASES[backend]
        low, high = case["range"]
        budget = math.ceil(math.log2(high - low + 1)) + 2
        grid = timed_sweep(ds, backend, case, args.target, "grid")
        tgt = timed_sweep(ds, backend, case, args.target, "target")
        print(f"\n== {backend} {case['build']}, {case['knob']} in [{low}, {high}]")
        over = "" if tgt["evaluations"] <= budget else " (OVER BUDGET)"
        d: dict[str, Any] = {}
        if args.skip_dense:
            print(f"cheapest {case['knob']}: target {tgt['value']} in {tgt['evaluations']} "
                  f"evaluations (budget {budget}){over}")
        else:
            d = dense_and_explore(ds, backend, case, args.target)
            same = "SAME" if tgt["value"] == d["dense_value"] else "DIFFERENT"
            print(f"cheapest {case['knob']}: target {tgt['value']} in {tgt['evaluations']} "
                  f"evaluations (budget {budget}); dense grid {d['dense_value']} in "
                  f"{d['dense_evaluations']} evaluations ({d['dense_s']:.1f} s) -> {same}{over}")
        if d.get("non_monotone_steps"):
            print(f"  note: recall bound not monotone at {d['non_monotone_steps']} step(s)")
        print(f"ann-benchmarks grid {case['grid']}: cheapest listed {grid['value']} "
              f"({grid['evaluations']} evaluations, every query timed)")
        mt, mg = tgt["measure_s"], grid["measure_s"]
        print(f"evaluation time: target {mt:.2f} s, grid {mg:.2f} s -> {mg / max(mt, 1e-9):.2f}x "
              f"cheaper (goal >= 3x)")
        print(f"end to end: target {tgt['wall_s']:.1f} s (build {tgt['build_s']:.1f} s, storage "
              f"and planning {tgt['other_s']:.1f} s), grid {grid['wall_s']:.1f} s (build "
              f"{grid['build_s']:.1f} s, other {grid['other_s']:.1f} s) -> "
              f"{grid['wall_s'] / tgt['wall_s']:.2f}x")
        if "explore_evaluations" in d:
            print(f"Faiss ParameterSpace.explore: {d['explore_evaluations']} evaluations "
                  f"({d['explore_s']:.1f} s) over nprobe {d['explore_candidates']}, smallest with "
                  f"mean recall >= target: {d['explore_value_mean']}")
            print(f"target over the same candidates: {d['target_on_candidates_evaluations']} "
                  f"evaluations -> {d['target_on_candidates_value']} (goal: no more than "
                  f"explore); over every integer: {tgt['evaluations']} -> {tgt['value']}")


if __name__ == "__main__":
    main()
