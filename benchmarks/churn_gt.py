"""Incremental ground truth under churn vs brute force recomputed at every step (issue 22).

A live set of ``--n`` vectors (synthetic clusters, or a dataset's base with ``--dataset``) gets
``--steps`` steps of churn: each step deletes ``--churn`` of the live ids at random and inserts
as many new vectors (new ids, never row numbers); after each step the exact top-``--k`` of the
queries over the live set is taken twice: from :class:`retrieval.groundtruth.live.LiveGroundTruth`
(maintained incrementally) and from :func:`retrieval.groundtruth.live.brute_force_live` (from
scratch), and timed a third way: Faiss ``IndexFlat`` from scratch
(:func:`retrieval.groundtruth.exact.
exact_knn`, what rwb's static ground truth uses; its tie order is Faiss's, so only its time is
compared). Printed: the time of each (the initial fill excluded), their ratio (goal >= 5x at 1%
churn per step), whether the ids were equal at every step, and the load average. Printed, never
asserted: speed is not a test.

Usage: python benchmarks/churn_gt.py [--n 20000] [--dim 384] [--queries 1000] [--steps 10]
                                     [--churn 0.01] [--k 10] [--margin 10] [--dataset NAME]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from retrieval.groundtruth.exact import exact_knn
from retrieval.groundtruth.live import LiveGroundTruth, brute_force_live
from retrieval.loaders.synthetic import make_synthetic


def _data(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, str]:
    per_step = max(1, int(args.churn * args.n))
    need = args.n + per_step * args.steps
    if args.dataset:
        from retrieval.loaders import load_dataset

        ds = load_dataset(args.dataset)
        if ds.n_base < need:
            raise SystemExit(f"--dataset {args.dataset}: {ds.n_base} base vectors < {need} needed")
        return np.asarray(ds.base[:need]), np.asarray(ds.queries[:args.queries]), ds.metric
    ds = make_synthetic(need, args.dim, args.queries, metric="l2", seed=0, name="churn-gt")
    return ds.base, ds.queries, "l2"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--churn", type=float, default=0.01)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--margin", type=int, default=10)
    ap.add_argument("--dataset", default="")
    args = ap.parse_args()
    base, queries, metric = _data(args)
    ids = 10**9 + 3 * np.arange(base.shape[0], dtype=np.int64)
    rng = np.random.default_rng(0)
    gt = LiveGroundTruth(queries, metric, args.k, margin=args.margin)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    gt.insert(base[:args.n], ids[:args.n])
    fill_s = time.perf_counter() - t0
    live = np.zeros(base.shape[0], dtype=bool)
    live[:args.n] = True
    nxt, per_step = args.n, max(1, int(args.churn * args.n))
    inc_s = brute_s = faiss_s = 0.0
    equal = True
    for _ in range(args.steps):
        gone = rng.choice(np.flatnonzero(live), size=per_step, replace=False)
        new = np.arange(nxt, nxt + per_step)
        nxt += per_step
        live[gone], live[new] = False, True
        t0 = time.perf_counter()
        gt.delete(ids[gone])
        gt.insert(base[new], ids[new])
        inc = gt.top()
        t1 = time.perf_counter()
        rows = np.flatnonzero(live)
        ref = brute_force_live(queries, base[rows], ids[rows], metric, args.k)  # type: ignore[arg-type]
        t2 = time.perf_counter()
        exact_knn(base[rows], queries, metric, args.k)  # type: ignore[arg-type]
        faiss_s += time.perf_counter() - t2
        inc_s += t1 - t0
        brute_s += t2 - t1
        equal &= bool(np.array_equal(inc.ids, ref.ids))
    st = gt.stats
    print(f"live set {args.n} x {base.shape[1]} ({metric}), {queries.shape[0]} queries, "
          f"k={args.k}, "
          f"margin={args.margin}, {args.steps} steps of {per_step} deletes + {per_step} inserts "
          f"({args.churn:.1%} churn)")
    print(f"initial fill (incremental, not counted): {fill_s:.2f} s")
    print(f"incremental: {inc_s:.3f} s ({inc_s / args.steps * 1e3:.1f} ms/step, "
          f"{st.recomputed} queries recomputed)")
    print(f"brute force every step: {brute_s:.3f} s ({brute_s / args.steps * 1e3:.1f} ms/step)")
    print(f"faiss IndexFlat every step: {faiss_s:.3f} s "
          f"({faiss_s / args.steps * 1e3:.1f} ms/step); "
          f"ratio faiss/incremental: {faiss_s / max(inc_s, 1e-9):.1f}x")
    print(f"ratio brute/incremental: {brute_s / max(inc_s, 1e-9):.1f}x (goal >= 5x); "
          f"ids equal at every step: {equal}")
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; cpus: {os.cpu_count()}")


if __name__ == "__main__":
    main()
