"""``rwb sweep --executor ray``: each unit of a sweep (one build config with its searches) runs as
one Ray task, with a resource request (CPUs = build threads, memory from the index's expected
size).

The Optuna study in its storage stays the single source of truth, exactly as with plain workers
(:mod:`retrieval.tune.worker`, :mod:`retrieval.tune.trials`): a task opens the storage itself,
queues its unit's next point if nothing is in flight, claims it (Optuna's atomic WAITING ->
RUNNING step), measures the unit's points in order and decides it. Ray only places the work.
When a node dies, Ray retries its tasks elsewhere; the retry finds the dead worker's RUNNING
trial, marks it FAIL (on the same host by pid, elsewhere once its heartbeat is older than the
grace period) and goes on from the unit's finished trials, which are kept. A restarted driver
submits a task for every unit that is not decided yet, so it resumes.

Every node reads the dataset itself: a manifest name, or a path every node can reach (the
spec's paths are made absolute on the driver, :func:`retrieval.loaders.catalog.dataset_ref`);
the task checks the study was made from the same spec and the same data (fingerprint). Ray is
imported only here, lazily: the default in-process executor needs no Ray.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.errors import ConfigError
from retrieval.indexes.base import SupportsMemoryEstimate
from retrieval.tune.spec import SweepSpec, checked_entries
from retrieval.tune.units import Unit

log = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")
RAY_EXTRA = "pip install 'retrieval-workbench[ray]'"
#: memory of a worker process before any data: Python, numpy, Optuna, an index library (bytes)
PROCESS_BYTES = 512 * 1024**2
#: tries of a task whose node died (Ray's own retry; an error raised by rwb is not retried)
MAX_RETRIES = 3


def require_ray() -> Any:
    """The ``ray`` module, or one line saying how to install it (ConfigError)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray: Ray is not installed; install it with {RAY_EXTRA} "
                          f"(or use the default --executor local)") from None
    return ray


# --- what a task asks for -----------------------------------------------------------------------
@dataclass(frozen=True)
class TaskResources:
    """What one unit's task asks the scheduler for: ``cpus`` (build and search threads) and
    ``memory_bytes`` (the process, the dataset it loads and the index it builds)."""

    cpus: int
    memory_bytes: int
    index_bytes: int
    data_bytes: int

    def ray_options(self) -> dict[str, Any]:
        return {"num_cpus": self.cpus, "memory": self.memory_bytes}


def task_threads(spec: SweepSpec) -> int:
    """CPUs of a unit's task: the spec's build threads (``index_build.threads``; when unset,
    the search ``threads``, since "every CPU" of a shared node is no request), at least the
    search threads."""
    return max(spec.index_build.threads or spec.threads, spec.threads, 1)


def index_bytes(spec: SweepSpec, unit: Unit, n: int, dim: int) -> int:
    """Expected bytes of the unit's index in the task's memory: the backend's own estimate
    (:class:`~retrieval.indexes.base.SupportsMemoryEstimate`), else twice the float32 vectors
    plus 64 bytes a vector (a copy in the index, ids, graph or lists)."""
    checked = checked_entries(spec)[unit.entry]
    if isinstance(checked.cls, SupportsMemoryEstimate):
        return int(checked.cls.expected_memory_bytes(checked.build(unit.build), n, dim))
    return 2 * n * dim * 4 + 64 * n


def task_resources(spec: SweepSpec, unit: Unit, n: int, dim: int, n_queries: int
                   ) -> TaskResources:
    """The resource request of ``unit`` on a dataset of ``n`` base and ``n_queries`` query
    vectors of ``dim`` float32 dimensions (ground truth: k int64 ids + float32 distances)."""
    data = (n + n_queries) * dim * 4 + n_queries * spec.k * 12
    index = index_bytes(spec, unit, n, dim)
    return TaskResources(task_threads(spec), PROCESS_BYTES + data + index, index, data)


def backend_modules(spec: SweepSpec) -> list[str]:
    """The modules that define the spec's backends: imported by each task first, so a backend
    registered by a plugin import on the driver is registered on every node too."""
    return sorted({checked.cls.__module__ for checked in checked_entries(spec)})


# --- the task (runs on a node) ------------------------------------------------------------------
@dataclass(frozen=True)
class TaskJob:
    """Everything a task needs, picklable: the spec, the dataset as every node resolves it,
    the storage URL (with its credentials: it travels inside the cluster only), the study."""

    spec: SweepSpec
    data_ref: Any
    storage_url: str
    study: str
    unit: dict[str, Any]
    modules: tuple[str, ...]
    poll_s: float = 0.5


def run_unit_task(job: TaskJob) -> dict[str, Any]:
    """Run one unit to its decision against the study (on whichever node Ray chose). Returns
    what this attempt did: worker, node, points measured, seconds building and measuring."""
    from retrieval.evaluation import Evaluator
    from retrieval.loaders.catalog import resolve_dataset
    from retrieval.tune import trials as tr
    from retrieval.tune.decide import split_queries
    from retrieval.tune.measure import Measurer
    from retrieval.tune.optuna_search import make_sampler
    from retrieval.tune.spec import resolved
    from retrieval.tune.storage import open_storage, open_study, spec_document
    from retrieval.tune.units import entry_labels
    from retrieval.tune.worker import Settings, Worker, study_metric

    started = time.perf_counter()
    for module in job.modules:
        importlib.import_module(module)
    unit = tr.unit_from_dict(job.unit)
    spec = job.spec
    ds = resolve_dataset(job.data_ref, where=f"{spec.source}: field 'dataset'")
    opened = open_storage(job.storage_url)
    doc = spec_document(resolved(spec), ds.fingerprint)  # same spec and same data, or refused
    metric = study_metric(spec.tune.strategy, spec.tune.objective)
    try:
        study, created = open_study(opened, job.study, doc, direction=metric.direction,
                                    sampler=make_sampler(spec.tune, spec.seed))
    except ConfigError as exc:  # e.g. this node read other data (another dataset fingerprint)
        raise ConfigError(f"on node {socket.gethostname()}: {exc} (every node must read the "
                          f"same data: a synthetic dataset depends on the BLAS thread count, "
                          f"set OMP_NUM_THREADS alike)") from None
    if created:
        raise ConfigError(f"study '{job.study}' is not in storage '{opened.display}' as this "
                          f"node sees it: every node must reach the same storage")
    threads = task_threads(spec)  # the CPUs this task holds, not every CPU of the node
    local = spec.model_copy(update={
        "index_build": spec.index_build.model_copy(update={"threads": threads})})
    split = split_queries(ds.n_queries, spec.tune.heldout_fraction, spec.seed)
    settings = Settings(spec.tune.strategy, spec.target_recall, spec.tune.objective,
                        poll_s=job.poll_s)
    workdir = tempfile.mkdtemp(prefix="rwb-task-")
    try:
        with Evaluator.for_spec(local, ds, _path(workdir)) as ev:
            measurer = Measurer(ev, split, spec.modes, spec.target_recall, spec.tune.confidence,
                                spec.seed, subset=spec.tune.query_subset)
            book = tr.Book(study, opened.storage, tr.this_worker())
            worker = Worker(local, entry_labels(spec), ev, measurer, book, settings, [unit],
                            scope=[unit.key])
            with tr.Heartbeat(study, book.worker):
                drive_unit(worker, unit, job.poll_s)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"unit": unit.key, "worker": book.worker, "node": _node_id(),
            "units_run": worker.units_run, "points_measured": worker.points_measured,
            "wall_s": time.perf_counter() - started, **worker.timing,
            "build_cpu_s": worker.build_cpu_s}


def _path(text: str) -> Any:
    from pathlib import Path

    return Path(text)


def _node_id() -> str | None:
    ray = sys.modules.get("ray")  # never import (or start) Ray here
    if ray is None or not ray.is_initialized():
        return None  # not inside a Ray task (tests call run_unit_task directly)
    return str(ray.get_runtime_context().get_node_id())


def drive_unit(worker: Any, unit: Unit, poll_s: float) -> None:
    """Claim and run ``unit``'s points until it is decided and none of its trials is still
    held: recover its trials from dead workers, queue its next point when nothing is in
    flight, wait while a live worker holds it. A retried task whose unit was decided just
    before its node died still closes the trial the dead attempt held (completed with its
    recorded point, :meth:`~retrieval.tune.trials.Book.fail_stale`)."""
    from optuna.trial import TrialState

    from retrieval.tune import trials as tr
    from retrieval.tune.worker import Claim

    book = worker.book

    def held() -> bool:  # a trial of this unit still held by a worker (a dead one: recovered)
        return any(t.user_attrs.get(tr.UNIT) == unit.key and tr.WORKER in t.system_attrs
                   for t in book.trials((TrialState.RUNNING,)))

    while True:
        if unit.key in book.done():
            if not held():
                return
            book.fail_stale(worker.s.grace_s)  # the trial a dead attempt held
            if held():
                time.sleep(poll_s)  # its worker is not known dead yet (another host)
            continue
        claim = None
        for t in book.trials((TrialState.WAITING,)):
            if t.user_attrs.get(tr.UNIT) == unit.key and book.try_pop(t):
                claim = Claim(unit, t._trial_id, dict(t.user_attrs[tr.SEARCH]))
                break
        if claim is not None:
            worker.run_unit(claim)
            continue
        worker.reconcile()  # scoped to this unit: fails stale trials, queues its next point
        if not any(t.user_attrs.get(tr.UNIT) == unit.key
                   for t in book.trials((TrialState.WAITING,))):
            time.sleep(poll_s)  # held by a live worker elsewhere: wait for it


# --- the driver ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClusterRun:
    """What the driver saw: one entry per finished task attempt, and the cluster it used."""

    tasks: list[dict[str, Any]]
    address: str | None
    nodes: int
    resources: dict[str, dict[str, Any]]


def check_executor(executor: str, spec: SweepSpec, in_memory: bool) -> None:
    """ConfigError (one line) for an executor that cannot run this sweep; imports Ray (the
    install hint when it is missing) for ``ray``."""
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor: unknown executor '{executor}'; allowed: "
                          f"{', '.join(EXECUTORS)}")
    if executor == "local":
        return
    if spec.tune.strategy == "optuna":
        raise ConfigError(f"{spec.source}: --executor ray runs strategies grid and target (one "
                          f"task per build config); strategy 'optuna' proposes builds as it "
                          f"goes: run plain workers on one --storage instead "
                          f"(docs/distributed.md)")
    for field, value in (("filters", spec.filters), ("scale", spec.scale),
                         ("tenants", spec.tenants)):
        if value is not None:
            raise ConfigError(f"{spec.source}: --executor ray does not run a spec with "
                              f"'{field}' yet; drop --executor ray (or run plain workers)")
    if in_memory:
        raise ConfigError("--executor ray: every node loads the dataset itself; name it in the "
                          "spec (a manifest or a path every node can reach), not as data in "
                          "memory (dataset=)")
    require_ray()


#: how long rwb waits for a Ray head to accept a connection before saying it is not reachable
RAY_CONNECT_TIMEOUT_S = 5.0


def check_ray_address(address: str | None, *, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Check ``--ray-address`` before any work: ``None`` / ``auto`` / ``local`` pass (Ray finds
    or starts a cluster); ``[ray://]HOST:PORT`` must be well formed (ConfigError, exit 2) and
    accept a TCP connection within ``timeout_s`` seconds (NotReachable, exit 3), where Ray
    itself would retry for minutes."""
    import socket

    from retrieval.errors import NotReachable

    if address is None or address in ("auto", "local"):
        return
    body = address.removeprefix("ray://")
    host, sep, port_text = body.rpartition(":")
    host = host.strip("[]")
    allowed = "'auto', 'local', HOST:PORT or ray://HOST:PORT"
    if (not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536
            or any(c.isspace() or c in "/@?#" for c in host)):
        raise ConfigError(f"--ray-address: expected {allowed}; received {address!r}")
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s):
            pass
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise NotReachable(f"--ray-address {address}: no Ray cluster answers there within "
                           f"{timeout_s:g} s ({why}); start one (ray start --head) or fix the "
                           f"address") from None


def run_on_ray(
    spec: SweepSpec,
    plan: Sequence[Unit],
    *,
    storage_url: str,
    study: str,
    done: Callable[[], Mapping[str, Any]],
    shape: tuple[int, int, int],
    address: str | None,
    progress: Callable[[int, int, str], None] | None = None,
    poll_s: float = 0.5,
) -> ClusterRun:
    """Submit one task per unit of ``plan`` not decided yet (``done()`` reads the study), wait
    for all of them and return what they did. ``shape``: (base vectors, queries, dim)."""
    ray = require_ray()
    owned = not ray.is_initialized()
    # Ray's driver threads print cluster events ("(raylet) Task ... failed ... will be
    # retried") to stdout: they go to stderr, stdout stays the CLI's (e.g. --json)
    with contextlib.redirect_stdout(sys.stderr):
        if owned:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False,
                     include_dashboard=False, configure_logging=False)
        try:
            return _drive(ray, spec, plan, storage_url, study, done, shape, address, progress,
                          poll_s)
        finally:
            if owned:
                ray.shutdown()


def _drive(ray: Any, spec: SweepSpec, plan: Sequence[Unit], storage_url: str, study: str,
           done: Callable[[], Mapping[str, Any]], shape: tuple[int, int, int],
           address: str | None, progress: Callable[[int, int, str], None] | None,
           poll_s: float) -> ClusterRun:
    from retrieval.loaders.catalog import dataset_ref
    from retrieval.tune import trials as tr

    remote = ray.remote(run_unit_task)
    n, nq, dim = shape
    modules = tuple(backend_modules(spec))
    ref = dataset_ref(spec.dataset)
    decided = done()
    pending: dict[Any, Unit] = {}
    resources: dict[str, dict[str, Any]] = {}
    for unit in plan:
        if unit.key in decided:
            continue
        req = task_resources(spec, unit, n, dim, nq)
        resources[unit.key] = {"cpus": req.cpus, "memory_bytes": req.memory_bytes}
        job = TaskJob(spec, ref, storage_url, study, tr.unit_to_dict(unit), modules, poll_s)
        opts = {**req.ray_options(), "max_retries": MAX_RETRIES, "retry_exceptions": False,
                "name": f"rwb-unit-{unit.label}-{unit.key}"}
        pending[remote.options(**opts).remote(job)] = unit
    log.info("submitted %d unit tasks to Ray (%d already decided)", len(pending),
             len(plan) - len(pending))
    tasks: list[dict[str, Any]] = []
    total = len(plan)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(poll_s, 1.0))
        for r in ready:
            unit = pending.pop(r)
            try:
                result = ray.get(r)
            except ray.exceptions.RayTaskError as exc:  # rwb's error, as the task raised it
                if isinstance(exc.cause, ConfigError):
                    raise exc.cause from None
                raise
            tasks.append(result)
            if progress is not None:
                progress(total - len(pending), total, f"{unit.label} decided "
                         f"(node {str(result.get('node'))[:8]})")
    nodes = len([nd for nd in ray.nodes() if nd.get("Alive")])
    return ClusterRun(tasks, address, nodes, resources)
