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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError, param_error, unknown_name_error
from retrieval.evaluation import Evaluator
from retrieval.redact import mask, redact_uri
from retrieval.runs import RunDir, RunKind
from retrieval.specfile import with_overrides
from retrieval.tune import trials as tr
from retrieval.tune.config import STRATEGIES, measures_resident
from retrieval.tune.decide import split_queries
from retrieval.tune.measure import Measurer
from retrieval.tune.optuna_search import Proposer, make_sampler
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

log = logging.getLogger(__name__)


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
        tune={**spec.tune.model_dump(), **tune} if tune else None,
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
        if not isinstance(study, dict) or manifest.get("kind", RunKind.SWEEP) != RunKind.SWEEP:
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
) -> SweepResult:
    """Run (or join, or resume) the sweep of ``spec`` and write its run directory. A non-empty
    ``out`` is refused unless it holds this sweep (same study and storage; resumed) or
    ``force``; manifest.json records the run's status."""
    started = time.perf_counter()
    check_tunable(spec)
    strategy = spec.tune.strategy
    plan = plan_units(spec, "grid" if strategy == "grid" else "target")  # checks every range
    if spec.filters is not None:  # filtered search: cheapest knob per bucket and strategy
        if storage is not None or study is not None:
            raise ConfigError(f"{spec.source}: a spec with 'filters' is tuned without an Optuna "
                              f"study (not resumable): drop --storage / --study")
        return _filtered_sweep(spec, out, dataset, progress, force, started)
    name = study or spec.name
    check_study_name(name, storage)
    resumable = resumable_run(name, redact_uri(storage) if storage else None)
    run = RunDir.create(out, spec.name, force=force, resumable=resumable)
    with run.recording():
        return _sweep_into(run, spec, plan, name, storage, dataset, progress, poll_s, started)


def _filtered_sweep(spec: SweepSpec, out: Path | str | None, dataset: VectorDataset | None,
                    progress: Progress | None, force: bool, started: float) -> SweepResult:
    from retrieval.tune.fsweep import filtered_sweep_into

    if spec.tune.strategy != "target":
        raise param_error("tune.strategy", "target for a spec with 'filters' (per-bucket knob "
                          "search; rwb eval measures a grid)", spec.tune.strategy,
                          where=spec.source)
    run = RunDir.create(out, spec.name, force=force)
    with run.recording():
        ds = dataset or load_vectors(spec)
        summary = filtered_sweep_into(run, spec, ds, progress, started)
    return SweepResult(run, summary, len(summary["choices"]), int(summary["evaluations"]))


def _sweep_into(
    run: RunDir, spec: SweepSpec, plan: list[Unit], name: str, storage: str | None,
    dataset: VectorDataset | None, progress: Progress | None, poll_s: float, started: float,
) -> SweepResult:
    if storage is None:  # the run's own SQLite: never through a link planted in the folder
        for link in ("study.db", "study.db.lock", "study.db-wal", "study.db-shm"):
            if run.file(link).is_symlink():
                raise ConfigError(f"'{run.file(link)}' is a symbolic link; rwb never writes "
                                  f"through links (remove it)")
    opened = open_storage(storage or default_url(run.path))
    ds = dataset or load_vectors(spec)
    try:
        return _sweep_study(run, spec, plan, name, opened, ds, progress, poll_s, started,
                            recorded_ref(spec, dataset))
    except Exception as exc:
        lost = storage_failure(exc)
        if lost is None:
            raise
        raise storage_lost(opened.display, lost, run.path) from None


def _sweep_study(
    run: RunDir, spec: SweepSpec, plan: list[Unit], name: str, opened: OpenedStorage,
    ds: VectorDataset, progress: Progress | None, poll_s: float, started: float,
    ref: Any,
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
        kind=RunKind.SWEEP,
        seeds={"index": spec.seed, "query_split": spec.seed, "sampler": spec.seed},
        dataset={**dataset_info(ds), "ref": ref},
        spec_source=spec.source,
        study={"storage": opened.display, "name": name, "created_here": created},
    )
    split = split_queries(ds.n_queries, spec.tune.heldout_fraction, spec.seed)
    settings = Settings(strategy, spec.target_recall, spec.tune.objective,
                        memory=measures_resident(spec.tune), poll_s=poll_s)
    with Evaluator.for_spec(spec, ds, run.work_dir()) as ev:
        measurer = Measurer(
            ev, split, spec.modes, spec.target_recall, spec.tune.confidence, spec.seed
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
        run.record_threads(spec.threads)  # what the backends were told, now they ran
        cache = ev.cache_report()
        run.update_manifest(builds=ev.threads_report(), index_cache=cache)
    run.remove_work()  # index files (e.g. Milvus Lite db)
    summary = build_summary(
        spec, ds, split, book, run_id=run.run_id, storage=redact_uri(opened.display),
        study_name=name,
    )
    wall = time.perf_counter() - started
    summary["this_worker"] = {
        "worker": book.worker,
        "units_run": worker.units_run,
        "points_measured": worker.points_measured,
        "wall_s": wall,
        **worker.timing,
        "other_s": wall - sum(worker.timing.values()),
        "note": "other_s: dataset, storage, planning, waiting for other workers",
        "index_cache": {
            "hits": cache["hits"], "misses": cache["misses"], "off": cache["off"],
            "load_s": sum(b["load_s"] or 0.0 for b in cache["builds"]),
            "note": "build_s (in builds and rows) is the original build time for a loaded "
                    "index; build_s above is this worker's time building or loading",
        },
    }
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    summary = typed.to_json_dict()
    if summary["rows"]:
        run.write_table("trials.parquet", summary["rows"])
    return SweepResult(run, summary, worker.units_run, worker.points_measured)
