"""ef(N) transfer: a scale study (tune on nested samples, one build at the full N) against a
full-N target sweep of the same build configs (issue 21).

Data: synthetic clustered Gaussian vectors, N x 96 (default 1,000,000; ``--n`` to shrink), 1,000
queries, l2; and with ``--qqp`` the full QQP MiniLM set (``qqp-minilm``, ~137k x 384, cosine)
with samples of 8k / 17k / 34k / 68k. Four build configs: hnswlib M 16 / ef_construction 100,
hnswlib M 8 / ef_construction 50, faiss-hnsw M 16 / efConstruction 100, faiss-ivf with
``nlist: 4*sqrt(N)`` (nprobe predicted as a fraction of nlist). Target recall@10 0.95 (95%
bootstrap lower bound over the tuning half of the queries).

Printed, never asserted, for each build: knob at each sample size, the fitted model, the
predicted and exact knob at the full N, the transfer error (goal: within 15%) of the fitted
knob, of the miss-rate surface model (``predicted_surface``, ``transfer_error_surface``) and of
the per-query difficulty model (``predicted_difficulty``, ``transfer_error_difficulty``), the
noise floor of the knob (``fit.unseeded_spread``: (max - min) / median of the knob over 3
identical builds at each sample size, for builds that cannot be seeded), the held-out lower
bound at the predicted knob (goal: meets the target), the ceiling; and the
cost of the answer (all sample builds + the answer build's one build at full N:
``scale.answer`` of the summary) vs the full-N target sweep (goal: <= 0.6x), and the cost with
every build checked at full N (what gives every build's transfer error), with the load average.

``--sampling uniform,cells`` runs the study once per ``scale.sampling`` on the same data (the
full-N sweep once) and prints, after each study's own table, ONE table of the four models'
transfer errors per sampling side by side (and, for ``cells``, the cells and tuning queries each
sample judged).

``predicted_partition`` / ``transfer_error_partition``: the coarse-partition model of the IVF
build (its column in both tables; the line under the build gives its seconds beside the
full-N build's). ``--builds faiss-ivf`` studies that build alone; ``--partition-train
"largest sample"`` trains the model's quantizer on the largest sample instead of the build's
own training rows.

Usage: python benchmarks/scale_transfer.py [--n 1000000] [--queries 1000] [--qqp] [--threads T]
       [--sampling uniform,cells] [--builds hnswlib-16,hnswlib-8,faiss-hnsw,faiss-ivf]
       [--partition-train build | "largest sample"]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.tune import scale_cells as cells
from retrieval.tune import scale_partition as sp
from retrieval.tune.scale import rule_value
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

TARGET = 0.95
IVF_RULE = "4*sqrt(N)"


def clustered(n: int, nq: int, d: int = 96, seed: int = 0, centres: int = 1000,
              chunk: int = 200_000) -> VectorDataset:
    """Gaussian blobs, generated in chunks (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, d)).astype(np.float32) * 2.0
    base = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        base[start:stop] = c[rng.integers(0, centres, stop - start)]
        base[start:stop] += rng.normal(size=(stop - start, d)).astype(np.float32)
    q = c[rng.integers(0, centres, nq)] + rng.normal(size=(nq, d)).astype(np.float32)
    return VectorDataset.from_arrays(base, q, "l2", name=f"blobs-{n}x{d}-{centres}c")


#: the build labels ``--builds`` picks from (default: all four)
BUILDS = ("hnswlib-16", "hnswlib-8", "faiss-hnsw", "faiss-ivf")


def entries(n: int | None, builds: tuple[str, ...] = BUILDS) -> list[dict[str, Any]]:
    """The build configs named by ``builds`` among :data:`BUILDS` (``n``: the full N for the
    IVF rule in the full-N sweep)."""
    nlist = rule_value(IVF_RULE, n) if n else 64
    every = [
        {"backend": "hnswlib", "label": "hnswlib-16", "build": {"M": 16, "ef_construction": 100},
         "search": {"ef_search": 10}},
        {"backend": "hnswlib", "label": "hnswlib-8", "build": {"M": 8, "ef_construction": 50},
         "search": {"ef_search": 10}},
        {"backend": "faiss-hnsw", "build": {"M": 16, "ef_construction": 100},
         "search": {"ef_search": 10}},
        {"backend": "faiss-ivf", "build": {"nlist": nlist}, "search": {"nprobe": 1}},
    ]
    return [e for e, label in zip(every, BUILDS, strict=True) if label in builds]


def spec(name: str, n: int | None, threads: int, scale: dict[str, Any] | None,
         builds: tuple[str, ...] = BUILDS) -> Any:
    doc: dict[str, Any] = {
        "name": name, "dataset": "synthetic-small", "k": 10, "target_recall": TARGET,
        "threads": threads, "warmup": 0, "batch_repeats": 1, "modes": ["batch"],
        "index_build": {"threads": threads, "cache": False},
        "indexes": entries(n, builds), "tune": {"strategy": "target", "objective": "qps"},
    }
    if scale is not None:
        doc["scale"] = scale
    return parse_spec(doc, source=f"{name}.yaml")


def pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:+.1f}%"


def _spread(b: dict[str, Any]) -> str:
    """The knob's spread over identical builds at the samples (unseeded builds only)."""
    v = (b.get("fit") or {}).get("unseeded_spread")
    return "-" if v is None else f"{100 * v:.0f}%"


def _lb(b: dict[str, Any]) -> str:
    """The held-out recall lower bound at the difficulty model's knob (full N)."""
    v = (b.get("predicted_difficulty_recall") or {}).get("heldout_lb")
    return "-" if v is None else f"{v:.4f}"


def _ref_knob(by_label: dict[str, Any], b: dict[str, Any]) -> int | None:
    """The knob the full-N target sweep chose for the build of ``b`` (its own full-N build)."""
    ref = by_label.get(b["label"])
    return (ref.get("chosen") or {}).get("search", {}).get(b["knob"]) if ref else None


def compare(ds: VectorDataset, scale: dict[str, Any], threads: int, out: Path,
            samplings: list[str], builds: tuple[str, ...] = BUILDS) -> None:
    """Each sampling's study on ``ds`` against ONE full-N target sweep, then the side-by-side
    table of the three models' transfer errors per sampling."""
    studies: dict[str, dict[str, Any]] = {}
    for sampling in samplings:
        t0 = time.perf_counter()
        study = run_sweep(spec(f"scale-{sampling}", None, threads,
                               {**scale, "sampling": sampling}, builds),
                          out / f"scale-{sampling}", dataset=ds)
        studies[sampling] = {"summary": study.summary, "s": time.perf_counter() - t0}
        print(f"[{sampling} study: {studies[sampling]['s']:.1f} s; its errors so far (no "
              f"full sweep yet):]")
        side_by_side(ds, {sampling: studies[sampling]}, {"backends": {}})
        print(flush=True)
    t0 = time.perf_counter()
    full = run_sweep(spec("full", ds.n_base, threads, None, builds), out / "full", dataset=ds)
    full_s = time.perf_counter() - t0
    for sampling, got in studies.items():
        print(f"\n--- scale.sampling: {sampling} ---")
        one_study(ds, got["summary"], got["s"], full.summary, full_s, threads)
    side_by_side(ds, studies, full.summary)


def side_by_side(ds: VectorDataset, studies: dict[str, dict[str, Any]],
                 full: dict[str, Any]) -> None:
    """One table: per build, the knobs at the samples and the four models' transfer errors
    under each sampling (the exact knob is each study's own full-N build's)."""
    by_label = dict(full["backends"])
    print(f"\n{ds.name}: transfer error per sampling (goal: within 15% on at least 3 of 4 "
          f"builds)")
    print(f"{'sampling':<13} {'build':<12} {'knob at samples':<22} {'exact':>6} {'ref':>5} "
          f"{'fitted':>16} {'surface':>16} {'difficulty':>16} {'partition':>16}")
    for sampling, got in studies.items():
        s = got["summary"]
        for b in s["builds"]:
            knobs = " ".join("x" if r["knob"] is None else str(r["knob"]) for r in b["samples"])
            cols = [f"{b.get(key)!s} ({pct(b.get(err))})" for key, err in (
                ("predicted", "transfer_error"), ("predicted_surface", "transfer_error_surface"),
                ("predicted_difficulty", "transfer_error_difficulty"),
                ("predicted_partition", "transfer_error_partition"))]
            print(f"{sampling:<13} {b['label']:<12.12} {knobs:<22.22} {b['exact']!s:>6} "
                  f"{_ref_knob(by_label, b)!s:>5} {cols[0]:>16} {cols[1]:>16} {cols[2]:>16} "
                  f"{cols[3]:>16}")
        tally = []
        for key in ("transfer_error", "transfer_error_surface", "transfer_error_difficulty",
                    "transfer_error_partition"):
            errs = [b.get(key) for b in s["builds"] if b.get(key) is not None]
            tally.append(f"{key} {sum(abs(e) <= 0.15 for e in errs)}/{len(errs)}")
        print(f"{'':<13} within 15%: {', '.join(tally)}")
        plan = s["scale"].get("cells")  # (not the module ``cells``)
        if plan:
            rule = plan["query_rule"]
            per = "; ".join(f"N {c['n']:,}: {c['cells']} cells, {c['tuning_queries']} queries"
                            + ("" if c["query_rule"] == rule else f" (rule {c['query_rule']})")
                            for c in plan["samples"])
            print(f"{'':<13} cells: C = {plan['count']} ({plan['rule']}); query rule "
                  f"{plan['query_rule']} (of {plan['tuning_queries']} tuning queries): {per}")


def one_study(ds: VectorDataset, s: dict[str, Any], scale_s: float, full_summary: dict[str, Any],
              full_s: float, threads: int) -> None:
    """One study's table against the full-N sweep (the figures as before ``--sampling``)."""
    print(f"\n{ds.name}: N = {ds.n_base:,}, samples {s['scale']['sizes']}, target {TARGET}")
    print(f"{'build':<28} {'knob at samples':<26} {'model':<6} {'pred':>6} {'exact':>6} "
          f"{'full sweep':>10} {'transfer':>9} {'surface':>7} {'transfer':>9} "
          f"{'difficulty':>10} {'transfer':>9} {'its lb':>7} {'partition':>9} {'transfer':>9} "
          f"{'noise':>6} {'held-out lb':>11} {'ceiling':>8}")
    by_label = dict(full_summary["backends"])
    for b in s["builds"]:
        knobs = " ".join("x" if r["knob"] is None else str(r["knob"]) for r in b["samples"])
        held = (b.get("predicted_recall") or {}).get("heldout_lb")
        ref_knob = _ref_knob(by_label, b)
        te, ceil = b["transfer_error"], b["ceiling"]
        print(f"{b['label'] + ' ' + str(b['build']):<28.28} {knobs:<26.26} "
              f"{(b.get('fit') or {}).get('model', '-'):<6} {b['predicted']!s:>6} "
              f"{b['exact']!s:>6} {ref_knob!s:>10} "
              f"{'-' if te is None else f'{100 * te:+.1f}%':>9} "
              f"{b.get('predicted_surface')!s:>7} {pct(b.get('transfer_error_surface')):>9} "
              f"{b.get('predicted_difficulty')!s:>10} "
              f"{pct(b.get('transfer_error_difficulty')):>9} {_lb(b):>7} "
              f"{b.get('predicted_partition')!s:>9} "
              f"{pct(b.get('transfer_error_partition')):>9} "
              f"{_spread(b):>6} "
              f"{'-' if held is None else f'{held:.4f}':>11} "
              f"{'-' if ceil is None else f'{ceil:.4f}':>8}")
        variants = (b.get("difficulty_fit") or {}).get("variants") or {}
        if len(variants) > 1 and b["exact"]:
            print("  difficulty model's variants: " + ", ".join(
                f"{v} {k} ({pct(None if k is None else (k - b['exact']) / b['exact'])})"
                for v, k in variants.items()))
        part = b.get("partition_fit")
        if part and part.get("reason"):
            print(f"  partition model: not covered: {part['reason']}")
        elif part:
            print(f"  partition model (used): nlist {part['nlist']:,}, trained on "
                  f"{part['train_rows']:,} rows ({part['training']}), {part['assigned_rows']:,} "
                  f"neighbour rows assigned: {part['seconds']:.2f} s (k-means "
                  f"{part['train_s']:.2f} s + assignment and ranking {part['assign_s']:.2f} s); "
                  + ("the full-N build took its quantizer (its k-means not repeated): "
                     if part.get("reused_by_full_build") else "the full-N build: ")
                  + f"{b['full_build_s'] or 0:.2f} s")
        if b.get("message"):
            print(f"  {b['message']}")
    noise = [abs(r - b["exact"]) / b["exact"] for b in s["builds"]
             if b["exact"] and (r := _ref_knob(by_label, b)) is not None]
    if noise:
        print(f"noise floor at full N: the exact knob of the study's build vs the full sweep's "
              f"build of the same config (two builds, {'seeded' if threads == 1 else 'unseeded'}):"
              f" {', '.join(f'{100 * v:.0f}%' for v in noise)} (largest {100 * max(noise):.0f}%)")
    within = [abs(b["transfer_error"]) <= 0.15 for b in s["builds"]
              if b["transfer_error"] is not None]
    meets = [bool((b.get("predicted_recall") or {}).get("meets")) for b in s["builds"]
             if b.get("predicted_recall")]
    print(f"predicted within 15% of exact: {sum(within)}/{len(within)}; predicted knob's held-out "
          f"lower bound meets the target: {sum(meets)}/{len(meets)}")
    surf = [abs(b["transfer_error_surface"]) <= 0.15 for b in s["builds"]
            if b.get("transfer_error_surface") is not None]
    print(f"surface model (miss rate over knob and N, every probe) within 15% of exact: "
          f"{sum(surf)}/{len(surf)}")
    diff = [abs(b["transfer_error_difficulty"]) <= 0.15 for b in s["builds"]
            if b.get("transfer_error_difficulty") is not None]
    print(f"difficulty model (per-query miss over knob and N, every probe and query) within 15% "
          f"of exact: {sum(diff)}/{len(diff)}")
    part = [abs(b["transfer_error_partition"]) <= 0.15 for b in s["builds"]
            if b.get("transfer_error_partition") is not None]
    print(f"partition model (IVF builds with exact vectors in their lists) within 15% of exact: "
          f"{sum(part)}/{len(part)}")
    cost = s["scale"]["cost_s"]
    ans = s["scale"].get("answer") or {}
    ref = max(((lb, (v.get("chosen") or {}).get("qps") or 0.0)
               for lb, v in full_summary["backends"].items()), key=lambda t: t[1])[0]
    if ans.get("cost_s") is not None:
        print(f"cost of the answer ({ans['label']}, {ans['chosen_by']}; the full-N sweep's "
              f"fastest: {ref}): samples {cost['samples_s']:.1f} s + one build at full N "
              f"{ans['cost_s'] - cost['samples_s']:.1f} s = {ans['cost_s']:.1f} s vs full-N "
              f"target sweep of the {len(s['builds'])} builds {full_s:.1f} s: "
              f"{ans['cost_s'] / full_s:.2f}x (goal <= 0.6x)")
    print(f"with every build checked at full N (check: all, for the transfer errors above): "
          f"{scale_s:.1f} s (samples {cost['samples_s']:.1f} s, full N {cost['full_s']:.1f} s):"
          f" {scale_s / full_s:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000,
                    help="synthetic base vectors (0: skip the synthetic set)")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--fractions", default="1/64,1/16,1/4")
    ap.add_argument("--qqp", action="store_true", help="also the full QQP MiniLM set (~137k)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--sampling", default="uniform",
                    help="scale.sampling values to compare on the same data, comma-separated "
                         "(uniform, neighbourhood, cells)")
    ap.add_argument("--centres", type=int, default=0,
                    help="clusters of the synthetic set (default N / 1000: 1000 at 1M, and at "
                         "--n 200000 a cluster holds what it holds in the 1M set)")
    ap.add_argument("--cell-queries", choices=["knn", "home"], default=cells.QUERY_RULE,
                    help="sampling cells: which tuning queries a sample judges (knn: all its "
                         "full-N k nearest in the sample's cells; home: its nearest centroid's "
                         "cell)")
    ap.add_argument("--partition-train", choices=["build", "largest sample"],
                    default=sp.TRAIN_ON,
                    help="the partition model's quantizer training rows: the full build's own "
                         "(default: its lists exactly) or the study's largest sample (cheaper)")
    ap.add_argument("--builds", default=",".join(BUILDS),
                    help=f"the builds to study, comma-separated among {', '.join(BUILDS)} "
                         f"(default: all)")
    args = ap.parse_args()
    builds = tuple(x.strip() for x in args.builds.split(",") if x.strip())
    bad = [x for x in builds if x not in BUILDS]
    if bad or not builds:
        ap.error(f"--builds: each of {', '.join(BUILDS)}; received {args.builds!r}")
    cells.QUERY_RULE = args.cell_queries
    sp.TRAIN_ON = args.partition_train
    samplings = [x.strip() for x in args.sampling.split(",") if x.strip()]
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    print(f"CPU {cpu}, {os.cpu_count()} cores; load average before: {os.getloadavg()}; "
          f"threads {args.threads}")
    scale = {"fractions": args.fractions.split(","), "build_rules": {"nlist": IVF_RULE}}
    with tempfile.TemporaryDirectory() as tmp:
        if args.n > 0:  # --n 0: only the QQP set
            centres = args.centres or max(1, round(args.n / 1000))
            compare(clustered(args.n, args.queries, centres=centres), scale, args.threads,
                    Path(tmp) / "syn", samplings, builds)
        if args.qqp:
            from retrieval.loaders.catalog import resolve_dataset

            qqp = resolve_dataset("qqp-minilm", where="benchmark")
            compare(qqp, {"sizes": [8_000, 17_000, 34_000, 68_000],
                          "build_rules": {"nlist": IVF_RULE}}, args.threads, Path(tmp) / "qqp",
                    samplings, builds)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
