"""`rwb eval`: build each index once per build config, run every search config, write the run."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.data import VectorDataset, footprint
from retrieval.evaluation import BuiltIndex, Evaluator, Measurement
from retrieval.indexes.entry import SearchConfig
from retrieval.indexes.knobs import knob_columns
from retrieval.runs import WORKLOAD_FILTERED, RunDir
from retrieval.tune.bucket_summary import (
    CLIFF_RULE,
    bind_spec_buckets,
    check_strategies,
    cliffs,
    filter_summary,
)
from retrieval.tune.filterbench import FilteredBench, filtered_row
from retrieval.tune.retrieved import RetrievedIds
from retrieval.tune.spec import SweepSpec, checked_entries, resolved
from retrieval.tune.summary import EvalSummary
from retrieval.tune.units import entry_labels
from retrieval.tune.workloads import eval_work_of
from retrieval.workload import filtered_workload

log = logging.getLogger(__name__)

#: progress callback: (done, total, description)
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class EvalResult:
    run: RunDir
    summary: dict[str, Any]
    measurements: list[Measurement]


def load_vectors(spec: SweepSpec) -> VectorDataset:
    from retrieval.loaders.catalog import resolve_dataset

    return resolve_dataset(spec.dataset, where=f"{spec.source}: field 'dataset'")


def summary_rows(measurements: list[Measurement], target: float | None) -> list[dict[str, Any]]:
    """Merge the single and batch rows of each config into one summary row: recall from batch
    (else single), latency percentiles (ms) from single mode, QPS from batch mode."""
    groups: dict[tuple[str, str, str, str], dict[str, Measurement]] = {}
    for m in measurements:
        key = (
            m.backend,
            repr(sorted(m.build.items())),
            repr(sorted(m.search.items())),
            m.query_set,
        )
        groups.setdefault(key, {})[m.mode] = m
    rows = []
    for by_mode in groups.values():
        single, batch = by_mode.get("single"), by_mode.get("batch")
        ref = batch or single
        assert ref is not None
        s = ref.summary(target)
        row: dict[str, Any] = {
            "backend": ref.backend,
            "build": ref.build,
            "search": ref.search,
            "recall": s["recall"],
            "recall_p5": s["recall_p5"],
            "recall_tie": s["recall_tie"],
            "p50_ms": None,
            "p95_ms": None,
            "p99_ms": None,
            "max_ms": None,
            "qps": batch.qps if batch else (single.qps if single else None),
            "single_qps": single.qps if single else None,
            "build_s": ref.build_s,
            "memory_bytes": ref.memory_bytes,
            "threads": ref.threads,
        }
        if "share_below_target" in s:
            row["share_below_target"] = s["share_below_target"]
        if single:
            row.update({k: v for k, v in single.summary().items() if k.endswith("_ms")})
            row.pop("mean_ms", None)
        rows.append(row)
    return rows


def config_columns(backend: str, build: Mapping[str, Any], search: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """How a config is stored in every table of a run (measurements.parquet, per_query.parquet):
    ``build``/``search`` as JSON strings with sorted keys (one config = one string pair, to
    join on), each param in its own typed column (``build.M``, ``search.ef_search``) and the
    engine-neutral ``knob`` / ``knob_native`` / ``knob_value`` (:mod:`retrieval.indexes.knobs`)."""
    return {
        "backend": backend,
        "build": json.dumps(dict(build), sort_keys=True),
        "search": json.dumps(dict(search), sort_keys=True),
        **{f"build.{k}": v for k, v in build.items()},
        **{f"search.{k}": v for k, v in search.items()},
        **knob_columns(backend, build, search),
    }


def measurement_rows(measurements: list[Measurement], target: float | None
                     ) -> list[dict[str, Any]]:
    """One row per config x mode (``measurements.parquet``)."""
    return [{**m.summary(target), **config_columns(m.backend, m.build, m.search)}
            for m in measurements]


def per_query_rows(measurements: list[Measurement]) -> list[dict[str, Any]]:
    """Per-query recall@k (by id, and tie-aware) of every config, one row per config x query
    (query = position in the dataset's query order); from batch mode, else single mode.
    The config as in :func:`config_columns`."""
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str, str]] = set()
    for m in sorted(measurements, key=lambda m: m.mode != "batch"):
        config = config_columns(m.backend, m.build, m.search)
        key = (m.backend, config["build"], config["search"], m.query_set)
        if key in seen:
            continue
        seen.add(key)
        for q, (r, rt) in enumerate(zip(m.per_query_recall, m.per_query_recall_tie)):
            rows.append({**config, "mode": m.mode, "query_set": m.query_set, "query": q,
                         "recall": float(r), "recall_tie": float(rt)})
    return rows


def run_eval(
    spec: SweepSpec,
    out: Path | str | None = None,
    *,
    progress: Progress | None = None,
    dataset: VectorDataset | None = None,
    force: bool = False,
) -> EvalResult:
    """Evaluate every build x search config of ``spec``; write and return the run directory.
    A non-empty ``out`` is refused unless ``force``; manifest.json records the run's status."""
    eval_work_of(spec)  # a kind rwb eval does not measure: refused here, in one line
    from retrieval.tune.preflight import check_services

    check_services([e.backend for e in spec.indexes], where=spec.source or "spec")
    run = RunDir.create(out, spec.name, force=force)
    with run.recording():
        return _eval_into(run, spec, progress, dataset)


def _eval_into(
    run: RunDir, spec: SweepSpec, progress: Progress | None, dataset: VectorDataset | None
) -> EvalResult:
    """The one `rwb eval` body: every build x search config of every entry, measured by the
    eval work of the spec's workload kind (:mod:`retrieval.tune.workloads`: :class:`PlainEval`
    or :class:`FilteredEval` for the built-in kinds)."""
    ds = dataset or load_vectors(spec)
    if spec.filters is not None:
        check_strategies(spec)
    run.write_yaml("spec.yaml", resolved(spec))
    run.write_manifest(
        kind=EvalSummary.KIND,
        seeds={"index": spec.seed, **({"filters": spec.seed} if spec.filters else {})},
        dataset=dataset_info(ds),
        spec_source=spec.source,
    )
    entries = checked_entries(spec)  # validated once when the spec was loaded
    total = sum(len(e.build_grid) * len(e.search_grid) for e in entries)
    done = 0
    with Evaluator.for_spec(spec, ds, run.work_dir()) as ev:
        work = eval_work_of(spec)(spec, ds, ev)
        for entry, label in zip(entries, entry_labels(spec), strict=True):
            for bi, build in enumerate(entry.build_grid):
                built = ev.build(entry.backend, entry.build(build))
                for ci, config in enumerate(entry.configs(build)):
                    work.measure(built, config, label, first=not (bi or ci))
                    done += 1
                    if progress:
                        progress(done, total, f"{entry.backend} {build} {config.given}")
                ev.release(built)
        run.record_threads(spec.threads)  # what the backends were told, now they ran
        run.update_manifest(builds=ev.threads_report(), index_cache=ev.cache_report())
    run.remove_work()  # index files (e.g. Milvus Lite db)
    work.write_tables(run)
    summary: dict[str, Any] = {
        "run_id": run.run_id,
        "dataset": ds.name,
        "dataset_fingerprint": ds.fingerprint,
        "metric": ds.metric,
        "k": spec.k,
        **work.summary(),
    }
    if spec.target_recall is not None:
        summary["target_recall"] = spec.target_recall
    typed = EvalSummary.model_validate(summary)
    run.write_summary(typed)
    return EvalResult(run, typed.to_json_dict(), work.measurements)


class PlainEval:
    """Unfiltered search: each config in the spec's modes over every query."""

    def __init__(self, spec: SweepSpec, ds: VectorDataset, ev: Evaluator) -> None:
        self.spec, self.ds, self.ev = spec, ds, ev
        self.measurements: list[Measurement] = []

    def measure(self, built: BuiltIndex, config: SearchConfig, label: str, *,
                first: bool) -> None:
        self.measurements += self.ev.measure(built, config, modes=self.spec.modes)

    def write_tables(self, run: RunDir) -> None:
        ms, target = self.measurements, self.spec.target_recall
        run.write_table("measurements.parquet", measurement_rows(ms, target))
        run.write_table("per_query.parquet", per_query_rows(ms))
        _retrieved(self.ds, ms).write(run)

    def summary(self) -> dict[str, Any]:
        return {"recall_definition": "recall@k by id (tie-aware variant in recall_tie)",
                "latency_unit": "ms (single-query mode); qps from batch mode",
                "rows": summary_rows(self.measurements, self.spec.target_recall)}


class FilteredEval:
    """Filtered search: each config x strategy x selectivity bucket, each query with its own
    filter (the pre-filter, exact over the matches, once per entry: the index plays no
    part)."""

    def __init__(self, spec: SweepSpec, ds: VectorDataset, ev: Evaluator) -> None:
        assert spec.filters is not None
        self.spec, self.ds, self.fs = spec, ds, spec.filters
        self.buckets = bind_spec_buckets(spec, ds, ev.gt.ids[:, 0])
        self.bench = FilteredBench(ev, filtered_workload(
            self.buckets, self.fs.strategies, base=ds.base, queries=ds.queries,
            metric=ds.metric, k=spec.k, fingerprint=ds.fingerprint))
        self.points: list[Measurement] = []
        self.measurements: list[Measurement] = []

    def measure(self, built: BuiltIndex, config: SearchConfig, label: str, *,
                first: bool) -> None:
        for strategy in self.fs.strategies:
            if strategy == "prefilter" and not first:
                continue  # exact over the matches: the index plays no part
            for b in self.buckets:
                self.points.append(self.bench.measure(
                    built, config, strategy, b, label=label, modes=self.spec.modes,
                    overfetch=self.fs.overfetch if strategy == "postfilter" else None))

    def rows(self) -> list[dict[str, Any]]:
        return [filtered_row(p, self.spec.target_recall) for p in self.points]

    def write_tables(self, run: RunDir) -> None:
        run.write_table("measurements.parquet", [_flat_row(r) for r in self.rows()])
        run.write_table("per_query.parquet", _filtered_per_query(self.points))
        saved = RetrievedIds(self.ds)
        for p in self.points:
            assert p.filtered is not None
            c = p.filtered
            saved.add({"backend": p.backend, "label": c.label, "build": p.build,
                       "search": p.search, "strategy": c.strategy, "bucket": c.bucket.name,
                       "overfetch": c.overfetch}, p.query_idx, p.ids, p.query_set)
        saved.write(run)

    def summary(self) -> dict[str, Any]:
        rows = self.rows()
        target = self.spec.target_recall
        best, by = cliffs(rows, target)
        return {
            "recall_definition": "filtered recall@k by id (fewer-than-k rule; tie-aware in "
                                 "recall_tie)",
            "latency_unit": "ms (single-query mode, each query with its filter); qps from batch",
            "workload": WORKLOAD_FILTERED, "rows": rows,
            "filters": filter_summary(self.fs, self.buckets),
            "cliff_selectivity": best if target is not None else {},
            "cliff_by_strategy": by if target is not None else {},
            "cliff_rule": CLIFF_RULE,
        }


def _retrieved(ds: VectorDataset, measurements: list[Measurement]) -> RetrievedIds:
    """The retrieved ids of every config (batch mode, else single), as the caller's ids."""
    saved = RetrievedIds(ds)
    seen: set[tuple[str, str, str, str]] = set()
    for m in sorted(measurements, key=lambda m: m.mode != "batch"):
        key = (m.backend, json.dumps(m.build, sort_keys=True),
               json.dumps(m.search, sort_keys=True), m.query_set)
        if key not in seen:
            seen.add(key)
            saved.add({"backend": m.backend, "build": m.build, "search": m.search},
                      m.query_idx, m.ids, m.query_set)
    return saved


def dataset_info(ds: VectorDataset) -> dict[str, Any]:
    return {
        "name": ds.name,
        "fingerprint": ds.fingerprint,
        "n_base": ds.n_base,
        "n_queries": ds.n_queries,
        "dim": ds.dim,
        "metric": ds.metric,
        "source": ds.source,
        **footprint(ds),
        "info": {k: v for k, v in ds.info.items() if isinstance(v, str | int | float | bool)},
    }


def _flat_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k not in ("build", "search")}
    out.update(knob_columns(row["backend"], row["build"], row["search"]))
    out["build"] = json.dumps(row["build"], sort_keys=True)
    out["search"] = json.dumps(row["search"], sort_keys=True)
    return out


def _filtered_per_query(points: list[Measurement]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in points:
        assert p.filtered is not None
        c = p.filtered
        sel = c.bucket.per_query_selectivity
        for q, (r, rt) in enumerate(zip(p.per_query_recall, p.per_query_recall_tie)):
            out.append({"backend": p.backend, "label": c.label, "strategy": c.strategy,
                        "build": json.dumps(p.build, sort_keys=True),
                        "search": json.dumps(p.search, sort_keys=True),
                        "bucket": c.bucket.name, "query": q, "selectivity": float(sel[q]),
                        "recall": float(r), "recall_tie": float(rt)})
    return out
