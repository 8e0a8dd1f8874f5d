"""`rwb eval` on a spec with ``filters:``: every config x strategy x selectivity bucket.

Rows carry ``filter``, ``bucket``, ``selectivity`` (measured mean share of base vectors the
queries' filters match) and ``strategy``. The summary adds ``filters`` (each bucket with its
measured selectivity), ``cliff_selectivity`` per index entry (the best strategy per bucket) and
``cliff_by_strategy`` (see :data:`CLIFF_RULE`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.evaluate import Evaluator
from retrieval.filtering.spec import FilterSpec
from retrieval.store import RunDir, RunKind
from retrieval.tune.fmeasure import FilteredBench, FilterPoint
from retrieval.tune.spec import SweepSpec, checked_entries, resolved
from retrieval.tune.summary import EvalSummary
from retrieval.tune.units import entry_labels
from retrieval.workload.buckets import Bucket, bind_workload

log = logging.getLogger(__name__)

CLIFF_RULE = ("cliff_selectivity: the highest bucket selectivity at which no measured knob "
              "value (grid: any config; target sweep: the top of the knob range) reaches the "
              "target mean recall@k; null when every bucket reaches it. Recall is filtered "
              "recall@k (fewer-than-k rule: over the available matches).")
FEWER_THAN_K = ("a query whose filter matches m < k base vectors is scored over its m matches "
                "(hits / m); otherwise hits / k (missing ids count as misses)")


def bind_spec_workload(spec: SweepSpec, ds: VectorDataset, ev: Evaluator) -> list[Bucket]:
    """The spec's filter buckets on ``ds`` (``place: near`` uses the evaluator's exact top-1)."""
    assert spec.filters is not None
    return bind_workload(spec.filters, ds.attributes, ds.n_queries,
                         nearest=ev.gt.ids[:, 0], seed=spec.seed,
                         where=f"{spec.source}: field 'filters'")


def check_strategies(spec: SweepSpec) -> None:
    """Refuse ``engine`` for a backend without in-engine filtering, before anything runs."""
    from retrieval.indexes.base import SupportsFilter
    from retrieval.indexes.registry import get_backend

    assert spec.filters is not None
    if "engine" not in spec.filters.strategies:
        return
    for i, e in enumerate(spec.indexes):
        cls = get_backend(e.backend)
        if not issubclass(cls, SupportsFilter):
            raise ConfigError(
                f"{spec.source}: field 'indexes[{i}].backend' '{e.backend}' has no in-engine "
                f"filtering (SupportsFilter), but 'filters.strategies' has engine; allowed for "
                f"it: prefilter, postfilter")


def cliffs(rows: Iterable[dict[str, Any]], target: float | None
           ) -> tuple[dict[str, float | None], dict[str, dict[str, float | None]]]:
    """(cliff per label over its best strategy, cliff per label and strategy) from rows with
    ``label``, ``strategy``, ``bucket``, ``selectivity`` and ``meets`` (or recall)."""
    met: dict[tuple[str, str, str], bool] = {}
    sel: dict[str, float] = {}
    for r in rows:
        ok = r.get("meets")
        if ok is None:
            ok = target is not None and r["recall"] >= target - 1e-9
        key = (r["label"], r["strategy"], r["bucket"])
        met[key] = met.get(key, False) or bool(ok)
        sel[r["bucket"]] = float(r["selectivity"])
    by: dict[str, dict[str, float | None]] = {}
    for (label, strategy, bucket), ok in met.items():
        cur = by.setdefault(label, {}).get(strategy)
        if not ok:
            s = sel[bucket]
            by[label][strategy] = s if cur is None else max(cur, s)
        else:
            by[label].setdefault(strategy, None)
    best: dict[str, float | None] = {}
    for label in by:
        buckets = {b for (lab, _, b) in met if lab == label}
        failed = [sel[b] for b in buckets
                  if not any(ok for (lab, _, bb), ok in met.items() if lab == label and bb == b)]
        best[label] = max(failed) if failed else None
    return best, by


def filter_summary(spec: FilterSpec, buckets: list[Bucket]) -> dict[str, Any]:
    return {"strategies": list(spec.strategies), "place": spec.place,
            "buckets": [b.describe() for b in buckets], "fewer_than_k_rule": FEWER_THAN_K}


def filtered_eval_into(run: RunDir, spec: SweepSpec, ds: VectorDataset,
                       progress: Callable[[int, int, str], None] | None,
                       info: dict[str, Any]) -> dict[str, Any]:
    """The filtered `rwb eval` body (run directory opened by the caller; ``info``: the
    manifest's dataset facts)."""
    assert spec.filters is not None
    fs = spec.filters
    check_strategies(spec)
    run.write_yaml("spec.yaml", resolved(spec))
    run.write_manifest(kind=RunKind.EVAL, seeds={"index": spec.seed, "filters": spec.seed},
                       dataset=info, spec_source=spec.source)
    entries = checked_entries(spec)
    labels = entry_labels(spec)
    points: list[FilterPoint] = []
    with Evaluator.for_spec(spec, ds, run.work_dir()) as ev:
        buckets = bind_spec_workload(spec, ds, ev)
        bench = FilteredBench(ev, buckets)
        total = sum(len(e.build_grid) * len(e.search_grid) for e in entries)
        done = 0
        for entry, label in zip(entries, labels):
            for bi, build in enumerate(entry.build_grid):
                built = ev.build(entry.backend, entry.build(build))
                for ci, config in enumerate(entry.configs(build)):
                    for strategy in fs.strategies:
                        if strategy == "prefilter" and (bi or ci):
                            continue  # exact over the matches: the index plays no part
                        for b in buckets:
                            points.append(bench.measure(
                                built, config, strategy, b, label=label, modes=spec.modes,
                                overfetch=fs.overfetch if strategy == "postfilter" else None))
                    done += 1
                    if progress:
                        progress(done, total, f"{entry.backend} {build} {config.given}")
                ev.release(built)
        run.record_threads(spec.threads)
    run.remove_work()
    rows = [p.row(spec.target_recall) for p in points]
    run.write_table("measurements.parquet", [_flat(r) for r in rows])
    run.write_table("per_query.parquet", per_query_rows(points))
    best, by = cliffs(rows, spec.target_recall)
    summary: dict[str, Any] = {
        "run_id": run.run_id, "dataset": ds.name, "dataset_fingerprint": ds.fingerprint,
        "metric": ds.metric, "k": spec.k,
        "recall_definition": "filtered recall@k by id (fewer-than-k rule; tie-aware in "
                             "recall_tie)",
        "latency_unit": "ms (single-query mode, each query with its filter); qps from batch",
        "rows": rows, "filters": filter_summary(fs, buckets),
        "cliff_selectivity": best if spec.target_recall is not None else {},
        "cliff_by_strategy": by if spec.target_recall is not None else {},
        "cliff_rule": CLIFF_RULE,
    }
    if spec.target_recall is not None:
        summary["target_recall"] = spec.target_recall
    typed = EvalSummary.model_validate(summary)
    run.write_summary(typed)
    return typed.to_json_dict()


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    import json

    out = {k: v for k, v in row.items() if k not in ("build", "search")}
    out["build"] = json.dumps(row["build"], sort_keys=True)
    out["search"] = json.dumps(row["search"], sort_keys=True)
    return out


def per_query_rows(points: list[FilterPoint]) -> list[dict[str, Any]]:
    import json

    out: list[dict[str, Any]] = []
    for p in points:
        sel = p.bucket.per_query_selectivity
        for q, (r, rt) in enumerate(zip(p.per_query_recall, p.per_query_recall_tie)):
            out.append({"backend": p.backend, "label": p.label, "strategy": p.strategy,
                        "build": json.dumps(p.build, sort_keys=True),
                        "search": json.dumps(p.search, sort_keys=True),
                        "bucket": p.bucket.name, "query": q, "selectivity": float(sel[q]),
                        "recall": float(r), "recall_tie": float(rt)})
    return out


__all__ = ["CLIFF_RULE", "cliffs", "filtered_eval_into"]
