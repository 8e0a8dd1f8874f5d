"""The worker loop of ``rwb sweep``: claim a unit, build its index once, measure its points in
order (each one an Optuna trial), decide, repeat until the study is finished. One worker for
every workload: a filtered workload's units (entry x build x strategy x bucket) are measured by
the same :class:`~retrieval.tune.measure.Measurer` (given the workload), through the same study.

Several workers (processes, machines) may share one study; they coordinate only through it
(see :mod:`retrieval.tune.trials`). A worker that finds nothing to claim re-queues the units of
dead workers and waits for live ones, so every worker ends when the whole sweep is done.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from retrieval.evaluation import BuiltIndex, Evaluator
from retrieval.indexes.entry import SearchConfig
from retrieval.tune import trials as tr
from retrieval.tune.config import Objective, Strategy
from retrieval.tune.derived import derivation_plan
from retrieval.tune.measure import Measurer, attach_memory_report
from retrieval.tune.results import PointResult, UnitResult
from retrieval.tune.spec import SweepSpec, checked_entries
from retrieval.tune.units import Unit, canon, trial_params

log = logging.getLogger(__name__)

#: progress callback: (units done, units known, description)
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Claim:
    unit: Unit
    trial_id: int
    search: dict[str, Any]


@dataclass(frozen=True)
class Settings:
    strategy: Strategy
    target: float | None
    objective: Objective
    memory: bool = False
    poll_s: float = 0.5
    #: tune.concurrent_builds (1: one build at a time, as needed)
    concurrent_builds: int | Literal["auto"] = 1
    grace_s: float = 300.0
    plan_wait_s: float = 120.0

    @property
    def metric(self) -> Metric:
        return study_metric(self.strategy, self.objective)


@dataclass(frozen=True)
class Metric:
    """The one value every trial of a study records (its Optuna objective), with its unit: the
    name is what ``study.metric_names`` and optuna-dashboard show."""

    name: str
    direction: Literal["minimize", "maximize"]
    description: str


def study_metric(strategy: Strategy, objective: Objective) -> Metric:
    """The study's objective column: one quantity in one unit for every trial.

    - objective ``qps``: ``qps`` (queries per second, batch mode; maximize);
    - objective ``p95_ms``, strategy ``grid``: ``p95_ms`` (single-query p95 latency, ms): every
      grid point is timed in full;
    - objective ``p95_ms``, strategies ``target``/``optuna``: ``batch_ms_per_query`` (ms per
      query of a batch pass, 1000 / QPS): search steps are one batch pass (no single-query
      timing); the chosen config's p95 is measured afterwards, outside the trials.
    """
    if objective == "qps":
        return Metric("qps", "maximize", "queries per second, batch mode (higher is better)")
    if strategy == "grid" and objective == "p95_ms":
        return Metric("p95_ms", "minimize", "single-query p95 latency in ms (lower is better)")
    return Metric(
        "batch_ms_per_query", "minimize",
        "ms per query of a batch pass = 1000 / batch QPS (lower is better); target-search "
        "steps are timed as one batch pass, the chosen config's p95 is in the run summary",
    )


def objective_of(res: PointResult, metric: Metric) -> float:
    """The value of ``res`` in the study's one unit (see :func:`study_metric`)."""
    if metric.name == "qps":
        return float(res.qps or 0.0)
    if metric.name == "p95_ms" and res.p95_ms is not None:
        return float(res.p95_ms)
    if metric.name == "p95_ms":  # cannot happen: grid points are timed in full
        raise ValueError(f"point {res.search} has no single-query p95")
    return 1000.0 / float(res.qps or 1e-9)


def concurrent_plan(wanted: int | Literal["auto"], builds: int,
                    build_threads: int) -> tuple[int, int]:
    """(builds at once, threads per build) for ``builds`` independent builds: at most
    ``wanted`` (``auto``: every build) and at most ``build_threads`` at once, so that builds x
    threads never exceeds the build threads."""
    limit = builds if wanted == "auto" else int(wanted)
    pool = max(1, min(limit, builds, max(1, build_threads)))
    return pool, max(1, build_threads // pool)


class Worker:
    def __init__(
        self,
        spec: SweepSpec,
        labels: Sequence[str],
        ev: Evaluator,
        measurer: Measurer,
        book: tr.Book,
        settings: Settings,
        plan: Sequence[Unit],
        *,
        proposer: Any = None,
        progress: Progress | None = None,
        scope: Sequence[str] | None = None,
    ) -> None:
        self.spec, self.labels, self.ev, self.m = spec, list(labels), ev, measurer
        #: unit keys this worker recovers and queues (None: every unit of the study); a cluster
        #: task holds one unit (:mod:`retrieval.tune.cluster`)
        self.scope = None if scope is None else set(scope)
        self.book, self.s, self.plan = book, settings, list(plan)
        self.proposer = proposer
        self.progress = progress
        #: the spec's validated entries: units read back from the study (plain data) map onto
        #: them, so a config is validated once, not at every hop
        self.checked = checked_entries(spec)
        self._built: dict[str, BuiltIndex] = {}
        #: tune.build_search: derived: unit key -> the unit its build is derived from, and the
        #: build keys of sources (kept built while derived units may still need them)
        self._derivations = (derivation_plan(self.plan)
                             if spec.tune.build_search == "derived" else {})
        self._sources: set[str] = set()
        #: measure each build's resident memory (retrieval.memory)
        self.memory = settings.memory
        self.units_run = 0
        self.points_measured = 0
        #: seconds this worker spent building indexes and measuring configs (the rest of its
        #: wall time is storage, planning and waiting)
        self.timing: dict[str, float] = {"build_s": 0.0, "measure_s": 0.0}
        #: process CPU seconds spent building (every thread: the builds' own and the library's)
        self.build_cpu_s = 0.0
        #: builds run at once by :meth:`prebuild` (1: none were run concurrently)
        self.concurrent = 1

    # --- the loop ------------------------------------------------------------------------------
    def run(self, plan_owner: bool) -> None:
        if plan_owner:
            self.book.study.set_user_attr("rwb:creator", self.book.worker)
            self.reconcile()
            self.book.study.set_user_attr(tr.PLAN_DONE, True)
        else:
            self._wait_for_plan()
            self.reconcile()
        try:
            self.prebuild()
            while True:
                claim = self.claim()
                if claim is not None:
                    self.run_unit(claim)
                    continue
                if self.finished():
                    break
                time.sleep(self.s.poll_s)
                self.reconcile()
        finally:
            for built in list(self._built.values()):
                self.ev.release(built)
            self._built.clear()

    def _wait_for_plan(self) -> None:
        deadline = time.monotonic() + self.s.plan_wait_s
        while time.monotonic() < deadline:
            attrs = self.book.attrs()
            if attrs.get(tr.PLAN_DONE):
                return
            creator = attrs.get("rwb:creator")
            if creator and not tr.alive(creator, attrs, self.s.grace_s):
                log.info("the worker that created the study died while planning; taking over")
                return
            time.sleep(0.2)

    def claim(self) -> Claim | None:
        t = self.book.pop(prefer=lambda t: self._build_key_of(t) in self._built)
        if t is not None:
            unit = tr.unit_from_dict(t.user_attrs[tr.UNIT_DEF])
            return Claim(unit, t._trial_id, dict(t.user_attrs[tr.SEARCH]))
        if self.proposer is not None:
            claim: Claim | None = self.proposer.propose()
            return claim
        return None

    def finished(self) -> bool:
        from optuna.trial import TrialState

        attrs = self.book.attrs()
        done = {k[len(tr.DONE):] for k in attrs if k.startswith(tr.DONE)}
        trials = self.book.trials()
        started = {t.user_attrs.get(tr.UNIT) for t in trials if tr.UNIT in t.user_attrs}
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in trials):
            return False
        if self.proposer is not None and self.proposer.budget_left():
            return False
        wanted = {u.key for u in self.plan} | {k for k in started if k}
        return wanted <= done

    # --- units ---------------------------------------------------------------------------------
    @staticmethod
    def _build_key(unit: Unit) -> str:
        return f"{unit.backend}|{canon(unit.build)}"

    def _build_key_of(self, t: Any) -> str:
        d = t.user_attrs.get(tr.UNIT_DEF) or {}
        return f"{d.get('backend')}|{canon(d.get('build') or {})}"

    def config(self, unit: Unit, search: dict[str, Any]) -> SearchConfig:
        """The validated config of ``search`` on the unit's build (validated the first time)."""
        return self.checked[unit.entry].config(unit.build, search)

    def built(self, unit: Unit) -> BuiltIndex:
        key = self._build_key(unit)
        if key not in self._built:
            source = self._derivations.get(unit.key)
            # the source first, timed by its own call: its seconds are not counted twice
            src = None if source is None else self._source(source)
            t0, c0 = time.perf_counter(), time.process_time()
            params = self.checked[unit.entry].build(unit.build)
            if src is not None:  # tune.build_search: derived (retrieval.tune.derived)
                built = self.ev.derive(unit.backend, params, src)
            else:
                built = self.ev.build(unit.backend, params)
            if self.memory:
                attach_memory_report(built, self.ev.ds.base, unit.label, unit.build)
            self._built[key] = built
            self.timing["build_s"] += time.perf_counter() - t0
            self.build_cpu_s += time.process_time() - c0
        return self._built[key]

    def prebuild(self) -> None:
        """``tune.concurrent_builds``: build every independent build of the plan still needed
        (full builds and the sources of derived ones) at once, in a thread pool of that size,
        each build with ``build threads // pool`` threads (:func:`concurrent_plan`)."""
        wanted = self.s.concurrent_builds
        if wanted == 1 or self.memory:  # resident memory is measured one build at a time
            return
        done = self.book.done()
        pending = [u for u in self.plan if u.key not in done
                   and (self.scope is None or u.key in self.scope)]
        todo = {self._build_key(u): u for u in pending if u.key not in self._derivations}
        for u in pending:
            src = self._derivations.get(u.key)
            if src is not None:
                todo.setdefault(self._build_key(src), src)
        todo = {k: u for k, u in todo.items() if k not in self._built}
        pool, threads = concurrent_plan(wanted, len(todo), self.ev.build_threads)
        if pool <= 1:
            return
        from concurrent.futures import ThreadPoolExecutor

        log.info("building %d indexes %d at a time, %d build thread(s) each", len(todo), pool,
                 threads)
        t0, c0 = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(max_workers=pool, thread_name_prefix="rwb-build") as ex:
            futures = {key: ex.submit(self.ev.build, u.backend,
                                      self.checked[u.entry].build(u.build), build_threads=threads)
                       for key, u in todo.items()}
            for key, fut in futures.items():
                self._built[key] = fut.result()
        self.concurrent = pool
        self.timing["build_s"] += time.perf_counter() - t0
        self.build_cpu_s += time.process_time() - c0
        for u in todo.values():
            if any(src.key == u.key for src in self._derivations.values()):
                self._sources.add(self._build_key(u))

    def _source(self, unit: Unit) -> BuiltIndex:
        """The built source of derived builds (kept until the worker ends)."""
        key = self._build_key(unit)
        if key not in self._built:
            self.built(unit)
        self._sources.add(key)
        return self._built[key]

    def _release_unless_queued(self, unit: Unit) -> None:
        from optuna.trial import TrialState

        key = self._build_key(unit)
        if key in self._sources:
            return
        waiting = self.book.trials((TrialState.WAITING,))
        if any(self._build_key_of(t) == key for t in waiting):
            return
        built = self._built.pop(key, None)
        if built is not None:
            self.ev.release(built)

    def measure(self, unit: Unit, built: BuiltIndex, search: dict[str, Any]) -> PointResult:
        t0 = time.perf_counter()
        try:
            return self.m.point(built, unit, search, lambda s: self.config(unit, s))
        finally:
            self.timing["measure_s"] += time.perf_counter() - t0

    def run_unit(self, claim: Claim) -> None:
        """Measure ``claim`` and the unit's following points until it is decided. Each point is
        recorded on its trial before the next trial is created (or the unit decided) and told
        after, so a worker killed in between leaves a trial that recovery completes with its
        own measurement (:meth:`~retrieval.tune.trials.Book.fail_stale`): never a lost probe."""
        unit, tid, search = claim.unit, claim.trial_id, claim.search
        if unit.key in self.book.done():  # queued twice by racing recoveries: nothing to do
            self.book.fail(tid, "not measured: this unit was already decided")
            return
        measured = self.book.points(unit.key)
        nid: int | None = None
        recorded: float | None = None  # tid's objective value once recorded, until told
        clock = time.perf_counter()  # node time is charged to the points measured
        try:
            built = self.built(unit)
            while True:
                key = canon(search)
                res: PointResult | None = None
                if key in measured:  # measured by someone else meanwhile: never twice
                    self.book.fail(tid, "not measured: this config was already measured")
                else:
                    res = self.measure(unit, built, search)
                    measured[key] = res
                    self.points_measured += 1
                    metric = self.s.metric
                    value = objective_of(res, metric)
                    now = time.perf_counter()
                    self.book.record(tid, res, value, metric.name, self.s.target,
                                     node_s=now - clock)
                    recorded, clock = value, now
                nxt = unit.next_point(measured)
                nid = None
                if nxt is None:
                    self.book.mark_done(unit, self.decide(unit, built, measured))
                else:
                    params = trial_params(self.spec, unit, nxt, self.labels)
                    nid = self.book.create_running(unit, nxt, params)
                if recorded is not None:
                    self.book.tell_recorded(tid, recorded)
                    recorded = None
                self._report(unit, search, res)
                if nxt is None or nid is None:
                    break
                tid, search = nid, nxt
        except BaseException as exc:
            first = (str(exc).splitlines() or [""])[0]
            note = f"interrupted: {type(exc).__name__}: {first}"[:500]
            for t in (tid, nid):
                if t is not None:
                    try:
                        if t == tid and recorded is not None and self.book.complete_recorded(
                                t, f"{note} (completed with its own measurement)"):
                            continue  # measured and recorded: kept, never measured again
                        self.book.fail(t, note)
                    except Exception as also:  # the storage itself failed: the original
                        log.info("trial %s not marked failed: %s", t,  # error is the one
                                 (str(also).splitlines() or [""])[0])  # to report
                        break
            raise
        self.units_run += 1
        self._release_unless_queued(unit)

    def decide(self, unit: Unit, built: BuiltIndex, measured: dict[str, PointResult]) -> UnitResult:
        """The unit's cheapest config meeting the target, timed in full and re-measured on the
        held-out queries."""
        t0 = time.perf_counter()
        try:
            return self.m.decide(built, unit, measured, self.s.objective,
                                 lambda s: self.config(unit, s))
        finally:
            self.timing["measure_s"] += time.perf_counter() - t0

    # --- recovery and planning -----------------------------------------------------------------
    def reconcile(self) -> None:
        """Fail the trials of dead workers and queue the next point of every unit that is not
        done and has nothing in flight (on a new study: the first point of every unit)."""
        from optuna.trial import TrialState

        self.book.fail_stale(self.s.grace_s)
        trials = self.book.trials()
        done = self.book.done()
        inflight = {
            t.user_attrs.get(tr.UNIT)
            for t in trials
            if t.state in (TrialState.WAITING, TrialState.RUNNING)
        }
        units: dict[str, Unit] = {u.key: u for u in self.plan}
        for t in trials:
            if tr.UNIT_DEF in t.user_attrs and t.user_attrs[tr.UNIT] not in units:
                units[t.user_attrs[tr.UNIT]] = tr.unit_from_dict(t.user_attrs[tr.UNIT_DEF])
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        for key, unit in units.items():
            if key in done or key in inflight or (self.scope is not None and key not in self.scope):
                continue
            measured = self.book.points(key, complete)
            nxt = unit.next_point(measured)
            if nxt is None:  # measured but never decided: its worker died in between
                self.book.mark_done(unit, self.decide(unit, self.built(unit), measured))
                continue
            self.book.enqueue(unit, nxt, trial_params(self.spec, unit, nxt, self.labels))

    def _report(self, unit: Unit, search: dict[str, Any], res: PointResult | None) -> None:
        if self.progress is None:
            return
        self.progress(self.points_measured, len(self.plan), probe_line(unit, search, res))


def probe_line(unit: Unit, search: dict[str, Any], res: PointResult | None) -> str:
    """A progress line's text for one measured point: said to be a probe, the top of a target
    search's range said to be that (it asks whether the target can be met at all: never the
    answer), and whether its lower bound meets the target."""
    what = ",".join(f"{k}={v}" for k, v in search.items()) or "-"
    if res is None:
        return f"{unit.label} {what} (skipped)"
    top = ""
    if unit.method == "target" and unit.knob is not None \
            and search.get(unit.knob) is not None and int(search[unit.knob]) >= unit.high:
        top = " (top of the range: can the target be met at all?)"
    verdict = "" if res.meets is None else (
        ", meets the target" if res.meets else ", below the target")
    return (f"{unit.label} probe {what}{top}: recall={res.recall:.4f} "
            f"lb={res.recall_lb:.4f}{verdict}")
