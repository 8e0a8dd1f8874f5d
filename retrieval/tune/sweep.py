"""``rwb sweep``: tune a spec with one strategy into an Optuna study, then write the run directory.

Order matters for bad input: the spec and its search ranges are checked first, then the storage
is opened (a bad URL fails here, before any study exists), then the dataset is loaded, and only
then is the study created (or joined/resumed after checking it was made from the same spec).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError, param_error, unknown_name_error
from retrieval.evaluation import Evaluator
from retrieval.redact import mask, redact_uri
from retrieval.runs import RunDir, declares_kind
from retrieval.specfile import with_overrides
from retrieval.tune import trials as tr
from retrieval.tune.adaptive_run import QUERIES_TABLE, check_adaptive_spec, run_sweep_adaptive
from retrieval.tune.cold import starts_own_server
from retrieval.tune.config import STRATEGIES, measures_resident
from retrieval.tune.decide import split_queries
from retrieval.tune.derived import CHECK_ATTR, DOMINATED_ATTR, check_answer, undominated
from retrieval.tune.measure import Measurer
from retrieval.tune.optuna_search import Proposer, make_sampler
from retrieval.tune.quality import (
    Judgments,
    QualitySearch,
    check_judged,
    check_quality_spec,
    judgments_of,
    load_judged,
)
from retrieval.tune.retrieved import IDS_LOG, RetrievedIds
from retrieval.tune.runner import dataset_info, load_vectors
from retrieval.tune.spec import SweepSpec, resolved, validate_spec
from retrieval.tune.storage import (
    OpenedStorage,
    check_study_name,
    default_url,
    open_storage,
    open_study,
    spec_document,
    storage_failure,
    storage_lost,
)
from retrieval.tune.summary import SweepSummary, build_summary
from retrieval.tune.units import Unit, entry_labels, plan_units
from retrieval.tune.worker import Progress, Settings, Worker, study_metric
from retrieval.tune.workloads import SweepRequest, WorkloadKindDef, check_local, workload_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cluster:
    """Where units run: ``executor`` ``local`` (this process) or ``ray`` (tasks on the cluster
    at ``address``); ``storage_url``: the study's storage as every task opens it."""

    executor: str = "local"
    address: str | None = None
    storage_url: str | None = None

    def with_url(self, url: str) -> Cluster:
        return Cluster(self.executor, self.address, url)

    def describe(self) -> dict[str, Any]:
        return {"name": self.executor, "address": redact_uri(self.address or "") or None}


@dataclass(frozen=True)
class SweepResult:
    run: RunDir
    summary: dict[str, Any]
    units_run: int
    points_measured: int


def is_count(value: object) -> bool:
    """An int >= 1 (a bool or a string is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_target_recall(target: object, field: str) -> None:
    """ConfigError (one line) unless ``target`` is None or a number in (0, 1] (the Python API
    passes it unparsed: ``'high'`` or ``True`` are refused here, not compared)."""
    if target is None:
        return
    if (isinstance(target, bool) or not isinstance(target, int | float)
            or not 0.0 < target <= 1.0):
        raise param_error(field, "in (0, 1]", target)


def apply_overrides(
    spec: SweepSpec,
    *,
    strategy: str | None = None,
    target: float | None = None,
    n_trials: int | None = None,
    threads: int | None = None,
    build_threads: int | None = None,
) -> SweepSpec:
    """The spec with command-line overrides applied through validation (a value outside a
    field's range is refused as it would be in the file); the index entries are not validated
    again (they did not change)."""
    if strategy is not None and strategy not in STRATEGIES:
        raise unknown_name_error("strategy", str(strategy), STRATEGIES, where="--strategy")
    check_target_recall(target, "--target-recall")
    if n_trials is not None and not is_count(n_trials):
        raise param_error("--n-trials", "an integer >= 1", n_trials)
    tune = {k: v for k, v in (("strategy", strategy), ("n_trials", n_trials)) if v is not None}
    if build_threads is not None and (isinstance(build_threads, bool) or build_threads < 1):
        raise param_error("--build-threads", "an integer >= 1", build_threads)
    return with_overrides(
        spec,
        check=validate_spec,
        # exclude_unset: a strategy left to its default stays one (see resolve_strategy)
        tune={**spec.tune.model_dump(exclude_unset=True), **tune} if tune else None,
        target_recall=target,
        threads=threads,
        index_build=None if build_threads is None else {
            **spec.index_build.model_dump(), "threads": build_threads},
    )


def check_tunable(spec: SweepSpec) -> None:
    """Cross-field rules of a sweep (beyond the spec's own)."""
    strategy = spec.tune.strategy
    if strategy != "grid" and spec.target_recall is None:
        raise ConfigError(
            f"{spec.source}: strategy '{strategy}' needs a target recall: set field "
            f"'target_recall' (in (0, 1]) in the spec or pass --target-recall"
        )
    if spec.tune.objective == "p95_ms" and "single" not in spec.modes:
        raise ConfigError(
            f"{spec.source}: field 'tune.objective' p95_ms needs mode 'single' in field "
            f"'modes'; received modes {spec.modes} (or set tune.objective: qps)"
        )


def recorded_ref(spec: SweepSpec, given: VectorDataset | None) -> Any:
    """The spec's dataset as a reference that resolves from any folder (absolute paths,
    :func:`retrieval.loaders.catalog.dataset_ref`), what an export records for ``rwb verify``;
    None for data given in memory (``dataset=``: verify needs it given again)."""
    from retrieval.loaders.catalog import dataset_ref

    return None if given is not None else dataset_ref(spec.dataset)


def resumable_run(name: str, storage_display: str | None) -> Callable[[Path], bool]:
    """Whether a non-empty ``--out`` folder holds the sweep being resumed: its manifest names
    kind ``sweep``, study ``name`` and the same (redacted) storage (None: the folder's own
    default SQLite). Whether the spec is the same is checked when the study is opened."""

    def check(path: Path) -> bool:
        try:
            manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        study = manifest.get("study") if isinstance(manifest, dict) else None
        if not isinstance(study, dict) or not declares_kind(manifest, SweepSummary.KIND,
                                                            default=SweepSummary.KIND):
            return False
        display = storage_display or redact_uri(default_url(path))
        # as the manifest recorded it (through the redaction policy of every run file)
        return study.get("name") == name and study.get("storage") == mask(display)

    return check


def run_sweep(
    spec: SweepSpec,
    out: Path | str | None = None,
    *,
    storage: str | None = None,
    study: str | None = None,
    dataset: VectorDataset | None = None,
    progress: Progress | None = None,
    poll_s: float = 0.5,
    force: bool = False,
    executor: str = "local",
    ray_address: str | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
) -> SweepResult:
    """Run (or join, or resume) the sweep of ``spec`` and write its run directory. A non-empty
    ``out`` is refused unless it holds this sweep (same study and storage; resumed) or
    ``force``; manifest.json records the run's status. ``executor`` ``"ray"`` runs each unit
    as a Ray task on the cluster at ``ray_address`` (:mod:`retrieval.tune.cluster`; default: a
    local Ray); ``"local"`` (the default) measures in this process. ``qrels`` (query id -> doc
    id -> grade, the ids of ``dataset``): the judgments of an in-memory dataset, for a spec's
    quality ``target`` (:mod:`retrieval.tune.quality`)."""
    from retrieval.tune.cluster import check_executor, check_ray_address
    from retrieval.tune.preflight import check_services

    started = time.perf_counter()
    check_tunable(spec)
    strategy = spec.tune.strategy
    plan = plan_units(spec, "grid" if strategy == "grid" else "target")  # checks every range
    if ray_address is not None and executor != "ray":
        raise ConfigError("--ray-address applies to --executor ray only")
    check_executor(executor, spec, in_memory=dataset is not None)
    check_adaptive_spec(spec, executor)
    if executor == "ray":
        check_ray_address(ray_address)  # before the run folder: nothing left "running"
    check_quality_spec(spec, executor)
    if spec.target is not None:
        check_judged(spec, dataset is not None, qrels)
    check_services([e.backend for e in spec.indexes
                    if not (spec.cold and starts_own_server(e.backend))],
                   where=spec.source or "spec")
    kind = workload_of(spec)  # the spec's workload kind: its hooks run it (retrieval.tune.kinds)
    request = SweepRequest(executor, storage, study)
    if kind.study is not None:  # studied here, in this process
        check_local(spec, kind, request)
    plan = kind.plan(spec, request) or plan
    resumable = kind.resumable(spec) if kind.resumable is not None else None
    if kind.study is not None:  # studied without an Optuna study: measured and summarised here
        run = RunDir.create(out, spec.name, force=force, resumable=resumable)
        with run.recording():
            ds = dataset or load_vectors(spec)
            summary = kind.study(spec, run, ds, recorded_ref(spec, dataset), progress, started)
        return SweepResult(run, summary, kind.units(summary), int(summary.get("evaluations") or 0))
    cluster = Cluster(executor, ray_address)
    name = study or spec.name
    check_study_name(name, storage)
    resumable = resumable or resumable_run(name, redact_uri(storage) if storage else None)
    run = RunDir.create(out, spec.name, force=force, resumable=resumable)
    with run.recording():
        return _sweep_into(run, spec, plan, name, storage, dataset, progress, poll_s, started,
                           cluster, kind, qrels)


def _sweep_into(
    run: RunDir, spec: SweepSpec, plan: list[Unit], name: str, storage: str | None,
    dataset: VectorDataset | None, progress: Progress | None, poll_s: float, started: float,
    cluster: Cluster | None = None, kind: WorkloadKindDef | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
) -> SweepResult:
    if storage is None:  # the run's own SQLite: never through a link planted in the folder
        for link in ("study.db", "study.db.lock", "study.db-wal", "study.db-shm"):
            if run.file(link).is_symlink():
                raise ConfigError(f"'{run.file(link)}' is a symbolic link; rwb never writes "
                                  f"through links (remove it)")
    url = storage or default_url(run.path)
    opened = open_storage(url)
    judged: Judgments | None = None
    if spec.target is not None and dataset is None:
        ds, judged = load_judged(spec)
    else:
        ds = dataset or load_vectors(spec)
        judged = None if spec.target is None else judgments_of(ds, qrels or {})
    cluster = cluster or Cluster()
    try:
        return _sweep_study(run, spec, plan, name, opened, ds, progress, poll_s, started,
                            recorded_ref(spec, dataset), cluster.with_url(url),
                            kind or workload_of(spec), judged)
    except Exception as exc:
        lost = storage_failure(exc)
        if lost is None:
            raise
        raise storage_lost(opened.display, lost, run.path) from None


def _sweep_study(
    run: RunDir, spec: SweepSpec, plan: list[Unit], name: str, opened: OpenedStorage,
    ds: VectorDataset, progress: Progress | None, poll_s: float, started: float,
    ref: Any, cluster: Cluster, kind: WorkloadKindDef, judged: Judgments | None = None,
) -> SweepResult:
    strategy = spec.tune.strategy
    labels = entry_labels(spec)
    doc = spec_document(resolved(spec), ds.fingerprint)
    metric = study_metric(strategy, spec.tune.objective)
    sampler = make_sampler(spec.tune, spec.seed)
    optuna_study, created = open_study(opened, name, doc, direction=metric.direction,
                                       sampler=sampler)
    if not created and strategy == "optuna":  # another worker: do not replay its proposals
        optuna_study.sampler = make_sampler(spec.tune, spec.seed + 1 + os.getpid() % 100_000)
    run.write_yaml("spec.yaml", resolved(spec))
    run.write_manifest(
        kind=SweepSummary.KIND,
        seeds={"index": spec.seed, "query_split": spec.seed, "sampler": spec.seed},
        dataset={**dataset_info(ds), "ref": ref},
        spec_source=spec.source,
        study={"storage": opened.display, "name": name, "created_here": created},
        **({"executor": cluster.describe()} if cluster.executor != "local" else {}),
    )
    split = split_queries(ds.n_queries, spec.tune.heldout_fraction, spec.seed)
    plan = _undominated(spec, plan, optuna_study, created)
    plan = _screened(spec, plan, ds, split, optuna_study, created)
    if cluster.executor == "ray":
        return _sweep_on_ray(run, spec, plan, name, opened, ds, split, optuna_study, created,
                             progress, poll_s, started, cluster)
    settings = Settings(strategy, spec.target_recall, spec.tune.objective,
                        memory=measures_resident(spec.tune), poll_s=poll_s,
                        concurrent_builds=spec.tune.concurrent_builds)
    with Evaluator.for_spec(spec, ds, run.work_dir()) as ev:
        saved = RetrievedIds(ds, log=run.file(IDS_LOG))
        workload = kind.bind(spec, ds, ev) if kind.bind is not None else None
        measurer = Measurer(
            ev, split, spec.modes, spec.target_recall, spec.tune.confidence, spec.seed,
            retrieved=saved, workload=workload, subset=spec.tune.query_subset,
            quality=None if spec.target is None or judged is None else QualitySearch.create(
                spec.target, judged, split.tune, spec.source),
        )
        book = tr.Book(optuna_study, opened.storage, tr.this_worker())
        if created:
            book.describe(metric.name, metric.description, spec.target_recall)
        proposer = Proposer(spec, labels, book) if strategy == "optuna" else None
        worker = Worker(
            spec,
            labels,
            ev,
            measurer,
            book,
            settings,
            plan if strategy != "optuna" else [],
            proposer=proposer,
            progress=progress,
        )
        with tr.Heartbeat(optuna_study, book.worker):
            worker.run(plan_owner=created)
        adaptive = (run_sweep_adaptive(spec, ds, ev, split, book)
                    if spec.adaptive is not None else None)
        if spec.tune.build_search == "derived" and created and kind.checks_derived:
            _check_derived_answer(spec, ds, split, book, ev, measurer, plan, run, name,
                                  opened.display)
        run.record_threads(spec.threads)  # what the backends were told, now they ran
        cache = ev.cache_report()
        run.update_manifest(builds=ev.threads_report(), index_cache=cache)
    run.remove_work()  # index files (e.g. Milvus Lite db)
    saved.write(run)
    assert kind.summarise is not None, f"workload kind '{kind.name}' has no summary hook"
    summary = kind.summarise(spec, ds, split, book, plan, workload, run_id=run.run_id,
                             storage=redact_uri(opened.display), study_name=name)
    if spec.filters is None:
        summary.update(build_seconds(summary, worker))
    wall = time.perf_counter() - started
    summary["this_worker"] = {
        "worker": book.worker,
        "units_run": worker.units_run,
        "points_measured": worker.points_measured,
        "wall_s": wall,
        **worker.timing,
        "build_cpu_s": worker.build_cpu_s,
        "other_s": wall - sum(worker.timing.values()),
        "note": "other_s: dataset, storage, planning, waiting for other workers",
        "index_cache": {
            "hits": cache["hits"], "misses": cache["misses"], "off": cache["off"],
            "load_s": sum(b["load_s"] or 0.0 for b in cache["builds"]),
            "note": "build_s (in builds and rows) is the original build time for a loaded "
                    "index; build_s above is this worker's time building or loading",
        },
    }
    if adaptive is not None:
        summary["adaptive"] = adaptive[0]
        run.write_table(QUERIES_TABLE, adaptive[1])
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    summary = typed.to_json_dict()
    if summary["rows"]:
        flat = kind.table_row or (lambda r: r)
        rows = [flat(r) for r in summary["rows"]]
        run.write_table("trials.parquet", [_with_knob(r, src) for r, src in
                                           zip(rows, summary["rows"], strict=True)])
    return SweepResult(run, summary, worker.units_run, worker.points_measured)


def _undominated(spec: SweepSpec, plan: list[Unit], optuna_study: Any,
                 created: bool) -> list[Unit]:
    """tune.build_search: derived: the plan without its dominated builds
    (:func:`retrieval.tune.derived.undominated`, a pure function of the plan), recorded in the
    study by the worker that created it for the summary's ``pruned``."""
    kept, records = undominated(spec, plan)
    if records and created and optuna_study.user_attrs.get(DOMINATED_ATTR) is None:
        optuna_study.set_user_attr(DOMINATED_ATTR, records)
    return kept


def _screened(spec: SweepSpec, plan: list[Unit], ds: VectorDataset, split: Any,
              optuna_study: Any, created: bool) -> list[Unit]:
    """tune.build_screen: the plan without the candidates dropped on the sample
    (:mod:`retrieval.tune.screen`), screened once by the worker that created the study and
    recorded in it (a resumed or second worker reads the record)."""
    from retrieval.tune.screen import SCREEN_ATTR, screen, surviving

    if (spec.tune.build_screen is None or spec.filters is not None
            or spec.tune.strategy != "target"):
        return plan
    record = optuna_study.user_attrs.get(SCREEN_ATTR)
    if record is None and created:
        record = screen(spec, plan, ds, split)
        optuna_study.set_user_attr(SCREEN_ATTR, record)
    return surviving(plan, record)


def build_seconds(summary: dict[str, Any], worker: Worker) -> dict[str, Any]:
    """``build_wall_s`` (wall seconds this worker spent building, concurrent builds counted
    once, + the answer check's real build), ``build_cpu_s`` (process CPU seconds of the same
    builds, every thread), ``concurrent_builds`` (builds run at once) and ``build_cost_rule``:
    ``build_cost_s`` is the SUM of each build's own seconds (builds that overlapped each count
    in full), the figure that compares with building one at a time."""
    ans = summary.get("answer") or {}
    checks = ans.get("checks") or ([ans["check"]] if ans.get("check") else [])
    return {"build_wall_s": worker.timing["build_s"]
            + sum(float(c.get("real_build_s") or 0.0) for c in checks),
            "build_cpu_s": worker.build_cpu_s
            + sum(float(c.get("real_build_cpu_s") or 0.0) for c in checks),
            "concurrent_builds": worker.concurrent,
            "build_cost_rule": "build_cost_s: sum of each build's own seconds (full builds, "
                               "derivations, the real builds of the checks), overlapping "
                               "builds each counted in full; build_wall_s: wall seconds spent "
                               "building; build_cpu_s: process CPU seconds of those builds"}


def _check_derived_answer(spec: SweepSpec, ds: VectorDataset, split: Any, book: Any, ev: Any,
                          measurer: Any, plan: list[Unit], run: RunDir, name: str,
                          storage: str) -> None:
    """tune.build_search: derived: the answer's build, when derived, built for real and checked
    (:func:`retrieval.tune.derived.check_answer`), recorded in the study for the summary."""
    if book.attrs().get(CHECK_ATTR) is not None:
        return
    builds = build_summary(spec, ds, split, book, run_id=run.run_id, storage=redact_uri(storage),
                           study_name=name)["builds"]
    check = check_answer(spec, ev, measurer, book, plan, builds)
    if check is not None:
        book.study.set_user_attr(CHECK_ATTR, check)


def _with_knob(row: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the engine-neutral ``knob`` / ``knob_native`` / ``knob_value`` columns
    (:mod:`retrieval.indexes.knobs`) of its config (``src``: the row with dict params)."""
    from retrieval.indexes.knobs import knob_columns

    build, search = src.get("build"), src.get("search")
    if not isinstance(build, dict) or not isinstance(search, dict):
        return row
    return {**row, **knob_columns(str(src.get("backend")), build, search)}


def _sweep_on_ray(
    run: RunDir, spec: SweepSpec, plan: list[Unit], name: str, opened: OpenedStorage,
    ds: VectorDataset, split: Any, optuna_study: Any, created: bool, progress: Progress | None,
    poll_s: float, started: float, cluster: Cluster,
) -> SweepResult:
    """The driver of ``--executor ray``: one task per undecided unit, then the summary (from
    the study, as any worker writes it)."""
    from retrieval.tune.cluster import run_on_ray

    strategy = spec.tune.strategy
    metric = study_metric(strategy, spec.tune.objective)
    book = tr.Book(optuna_study, opened.storage, tr.this_worker())
    if created:
        book.describe(metric.name, metric.description, spec.target_recall)
        optuna_study.set_user_attr("rwb:creator", book.worker)
        optuna_study.set_user_attr(tr.PLAN_DONE, True)  # each task queues its own unit
    assert cluster.storage_url is not None
    result = run_on_ray(spec, plan, storage_url=cluster.storage_url, study=name, done=book.done,
                        shape=(ds.n_base, ds.n_queries, ds.dim), address=cluster.address,
                        progress=progress, poll_s=poll_s)
    missing = [u.label for u in plan if u.key not in book.done()]
    if missing:  # cannot happen: a task returns only once its unit is decided
        raise RuntimeError(f"units not decided after every task returned: {missing}")
    run.update_manifest(executor={**cluster.describe(), "nodes": result.nodes,
                                  "tasks": len(result.tasks), "resources": result.resources})
    summary = build_summary(
        spec, ds, split, book, run_id=run.run_id, storage=redact_uri(opened.display),
        study_name=name,
    )
    if spec.filters is None:  # Ray: one task per unit, its builds concurrent across the cluster
        summary.update(build_wall_s=None, concurrent_builds="ray", build_cpu_s=sum(
            float(t.get("build_cpu_s") or 0.0) for t in result.tasks),
            build_cost_rule="build_cost_s: sum of each build's own seconds; build_cpu_s: "
                            "summed over the Ray tasks; build_wall_s: not separable (tasks "
                            "overlap across nodes)")
    wall = time.perf_counter() - started
    summary["this_worker"] = {
        "worker": book.worker,
        "executor": "ray",
        "units_run": sum(int(t["units_run"]) for t in result.tasks),
        "points_measured": sum(int(t["points_measured"]) for t in result.tasks),
        "wall_s": wall,
        "build_s": sum(float(t["build_s"]) for t in result.tasks),
        "measure_s": sum(float(t["measure_s"]) for t in result.tasks),
        "nodes": sorted({str(t["node"]) for t in result.tasks}),
        "note": "this driver's Ray tasks (finished attempts only); build_s and measure_s "
                "summed over the tasks",
    }
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    summary = typed.to_json_dict()
    if summary["rows"]:
        run.write_table("trials.parquet", summary["rows"])
    return SweepResult(run, summary, summary["this_worker"]["units_run"],
                       summary["this_worker"]["points_measured"])
