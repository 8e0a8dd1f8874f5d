"""`rwb sweep --strategy target` on a spec with ``filters:``: the cheapest knob per selectivity
bucket and per filtering strategy, and the operating-point table.

Per index entry x build x strategy x bucket, the knob is searched with
:func:`retrieval.tune.target.solve` (galloping + bisection) on the tuning queries; a value meets
when the lower confidence bound on filtered mean recall@k is >= the target:

- ``engine``: the backend's monotone knob (``ef_search``, ``nprobe``, ``ef``; ``tune.knobs`` /
  ``tune.search_range`` apply), other search params as the entry's first search config;
- ``postfilter``: the over-fetch factor in ``[1, filters.overfetch_max]``, the backend's search
  params as the entry's first search config;
- ``prefilter``: exact, no knob: measured once per bucket.

The chosen value is timed in full (single-query p95, batch QPS) and re-measured on the held-out
queries. ``operating_points``: per bucket, the lowest p95 among the choices that pass the
held-out check: strategy + knob, with the engine's own call (``engine_call``). The cliff of
each entry and strategy is the highest bucket selectivity with no feasible knob value.
This sweep keeps no Optuna study (it is not resumable); the summary holds every probe.
"""

from __future__ import annotations

import time
from typing import Any

from retrieval.data import VectorDataset
from retrieval.evaluate import BuiltIndex, Evaluator
from retrieval.indexes.registry import get_backend
from retrieval.store import RunDir, RunKind
from retrieval.tune.decide import lower_bound, split_queries
from retrieval.tune.fmeasure import FilteredBench, FilterPoint
from retrieval.tune.frun import (
    CLIFF_RULE,
    bind_spec_workload,
    check_strategies,
    cliffs,
    filter_summary,
)
from retrieval.tune.spec import SweepSpec, checked_entries, resolved
from retrieval.tune.summary import SweepSummary
from retrieval.tune.target import solve
from retrieval.tune.units import entry_labels
from retrieval.workload.buckets import Bucket

EPS = 1e-9


def engine_call(backend: str, strategy: str, search: dict[str, Any], overfetch: int | None,
                k: int) -> str:
    """How the operating point is written in the engine's own terms."""
    if strategy == "prefilter":
        return f"exact search over the matching rows (faiss.knn on the subset), k={k}"
    if strategy == "postfilter":
        return (f"unfiltered search limit={k * (overfetch or 1)} ({_engine_search(backend, search)}"
                f"), then keep the first {k} matching ids")
    return {
        "hnswlib": f"index.set_ef({search.get('ef_search')}); index.knn_query(q, k={k}, "
                   f"filter=lambda label: matches[label])",
        "faiss-hnsw": f"faiss.SearchParametersHNSW(efSearch={search.get('ef_search')}, "
                      f"sel=faiss.IDSelectorBitmap(n, bitmap))",
        "faiss-ivf": f"faiss.SearchParametersIVF(nprobe={search.get('nprobe')}, "
                     f"sel=faiss.IDSelectorBitmap(n, bitmap))",
        "faiss-flat": "faiss.SearchParameters(sel=faiss.IDSelectorBitmap(n, bitmap))",
        "milvus": f"client.search(limit={k}, search_params={{'params': {search}}}, "
                  f"filter='<expression>')",
    }.get(backend, f"{backend} filtered search {search}")


def _engine_search(backend: str, search: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in search.items()) or "exact"


def _knob(spec: SweepSpec, built: BuiltIndex, label: str) -> tuple[str, int, int] | None:
    cls = get_backend(built.backend)
    knobs = cls.monotone_knobs_for(built.build)
    if not knobs:
        return None
    knob = spec.tune.knobs.get(label, spec.tune.knobs.get(built.backend, knobs[0]))
    low, high = cls.knob_range(knob, built.build, spec.k)
    if knob in spec.tune.search_range:
        lo, hi = spec.tune.search_range[knob]
        low, high = max(low, lo), min(high, hi)
    return knob, low, high


class _Tuner:
    def __init__(self, spec: SweepSpec, bench: FilteredBench, ds: VectorDataset) -> None:
        self.spec, self.bench = spec, bench
        self.split = split_queries(ds.n_queries, spec.tune.heldout_fraction, spec.seed)
        self.probes: list[dict[str, Any]] = []

    def _lb(self, p: FilterPoint) -> float:
        return lower_bound(p.per_query_recall, self.spec.k, self.spec.tune.confidence,
                           self.spec.seed)

    def probe(self, built: BuiltIndex, search: dict[str, Any], strategy: str, b: Bucket,
              label: str, overfetch: int | None) -> bool:
        p = self.bench.measure(built, search, strategy, b, label=label, overfetch=overfetch,
                               modes=("batch",), query_idx=self.split.tune, query_set="tune",
                               warmup=0, repeats=1)
        lb = self._lb(p)
        target = self.spec.target_recall or 1.0
        self.probes.append({**p.row(target), "recall_lb": lb, "timing": "probe"})
        return lb >= target - EPS

    def choose(self, built: BuiltIndex, first: dict[str, Any], strategy: str, b: Bucket,
               label: str) -> dict[str, Any]:
        fs = self.spec.filters
        assert fs is not None
        knob: tuple[str, int, int] | None
        if strategy == "prefilter":
            knob = None
        elif strategy == "postfilter":
            knob = ("overfetch", 1, fs.overfetch_max)
        else:
            knob = _knob(self.spec, built, label)

        def setting(v: int) -> tuple[dict[str, Any], int | None]:
            if knob is None:
                return dict(first), None
            if knob[0] == "overfetch":
                return dict(first), v
            return {**first, knob[0]: v}, None

        evals, seen = 0, len(self.probes)
        if knob is None:
            value: int | None = 0 if self.probe(built, first, strategy, b, label, None) else None
            evals = 1
        else:
            def meets(v: int) -> bool:
                search, overfetch = setting(v)
                return self.probe(built, search, strategy, b, label, overfetch)

            out = solve(knob[1], knob[2], meets)
            value, evals = out.value, out.evaluations
        doc: dict[str, Any] = {"label": label, "backend": built.backend, "build": built.build_dict,
                               "strategy": strategy, "bucket": b.name,
                               "selectivity": b.selectivity, "target_selectivity": b.target,
                               "knob_name": knob[0] if knob else None,
                               "range": [knob[1], knob[2]] if knob else None,
                               "evaluations": evals, "chosen": value is not None, "meets": False,
                               "best_probe_recall": max((float(p["recall"]) for p in
                                                         self.probes[seen:]), default=None)}
        if value is None:
            return doc
        search, overfetch = setting(value)
        full = self.bench.measure(built, search, strategy, b, label=label, overfetch=overfetch,
                                  modes=self.spec.modes, query_idx=self.split.tune,
                                  query_set="tune")
        row = full.row(self.spec.target_recall)
        doc.update({k: row.get(k) for k in ("recall", "recall_p5", "share_below_target",
                                            "p50_ms", "p95_ms", "p99_ms", "qps", "filter")})
        doc.update({"search": search, "overfetch": overfetch, "meets": True,
                    "knob": {knob[0]: value} if knob else {},
                    "recall_lb": self._lb(full),
                    "engine_call": engine_call(built.backend, strategy, search, overfetch,
                                               self.spec.k)})
        if self.split.heldout.size:
            h = self.bench.measure(built, search, strategy, b, label=label, overfetch=overfetch,
                                   modes=("batch",), query_idx=self.split.heldout,
                                   query_set="heldout", warmup=0, repeats=1)
            doc["heldout_recall"] = h.row(None)["recall"]
            doc["heldout_meets"] = bool(doc["heldout_recall"] >= (self.spec.target_recall or 1)
                                        - EPS)
        return doc


def operating_points(choices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per bucket (in selectivity order) the chosen setting with the lowest p95 among those that
    pass the held-out check (or have none)."""
    out = []
    buckets = sorted({c["bucket"]: c["selectivity"] for c in choices}.items(), key=lambda x: x[1])
    for name, sel in buckets:
        ok = [c for c in choices if c["bucket"] == name and c["chosen"]
              and c.get("heldout_meets", True) and c.get("p95_ms") is not None]
        best = min(ok, key=lambda c: c["p95_ms"], default=None)
        out.append({"bucket": name, "selectivity": sel, **({k: best.get(k) for k in (
            "label", "backend", "strategy", "knob", "search", "overfetch", "build", "p95_ms",
            "qps", "recall", "recall_lb", "heldout_recall", "engine_call")} if best else {
            "label": None, "strategy": None, "knob": None, "p95_ms": None,
            "note": "no strategy meets the target in this bucket"})})
    return out


def filtered_sweep_into(run: RunDir, spec: SweepSpec, ds: VectorDataset, progress: Any,
                        started: float) -> dict[str, Any]:
    from retrieval.tune.runner import dataset_info

    fs = spec.filters
    assert fs is not None
    check_strategies(spec)
    run.write_yaml("spec.yaml", resolved(spec))
    run.write_manifest(kind=RunKind.SWEEP, seeds={"index": spec.seed, "query_split": spec.seed},
                       dataset=dataset_info(ds), spec_source=spec.source)
    entries, labels = checked_entries(spec), entry_labels(spec)
    choices: list[dict[str, Any]] = []
    with Evaluator.for_spec(spec, ds, run.work_dir()) as ev:
        buckets = bind_spec_workload(spec, ds, ev)
        tuner = _Tuner(spec, FilteredBench(ev, buckets), ds)
        done = 0
        for entry, label in zip(entries, labels):
            for build in entry.build_grid:
                built = ev.build(entry.backend, entry.build(build))
                first = dict(entry.configs(build)[0].given) if entry.search_grid else {}
                for strategy in fs.strategies:
                    for b in buckets:
                        choices.append(tuner.choose(built, first, strategy, b, label))
                        done += 1
                        if progress:
                            progress(done, 0, f"{label} {strategy} {b.name}")
                ev.release(built)
        run.record_threads(spec.threads)
    run.remove_work()
    best, by = cliffs([{**c, "recall": 0.0} for c in choices], spec.target_recall)
    ops = operating_points(choices)
    summary: dict[str, Any] = {
        "kind": RunKind.SWEEP, "run_id": run.run_id, "name": spec.name, "dataset": ds.name,
        "dataset_fingerprint": ds.fingerprint, "metric": ds.metric, "k": spec.k,
        "strategy": "target", "target_recall": spec.target_recall,
        "objective": spec.tune.objective, "confidence": spec.tune.confidence.model_dump(),
        "queries": tuner.split.describe(),
        "recall_definition": "filtered recall@k by id over the tuning queries (fewer-than-k "
                             "rule; tie-aware in recall_tie)",
        "latency_unit": "ms, single-query mode (each query with its filter); qps from batch",
        "cheapest_rule": "per bucket and strategy: the smallest knob value whose lower "
                         "confidence bound on filtered mean recall meets the target; operating "
                         "point: lowest p95 among those passing the held-out check",
        "evaluations": len(tuner.probes), "backends": {}, "builds": [], "pareto": [],
        "rows": [*[{**r, "build": r["build"], "search": r["search"]} for r in tuner.probes]],
        "choices": choices, "operating_points": ops, "filters": filter_summary(fs, buckets),
        "cliff_selectivity": best, "cliff_by_strategy": by, "cliff_rule": CLIFF_RULE,
        "this_worker": {"wall_s": time.perf_counter() - started},
    }
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    out = typed.to_json_dict()
    run.write_table("trials.parquet", [_flat(r) for r in tuner.probes])
    return out


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    import json

    return {**{k: v for k, v in row.items() if k not in ("build", "search")},
            "build": json.dumps(row["build"], sort_keys=True),
            "search": json.dumps(row["search"], sort_keys=True)}
