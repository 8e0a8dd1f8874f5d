"""rwb's bookkeeping on top of an Optuna study: every measured config is one trial.

Conventions (all in the study, so any worker on any machine sees the same state):

- trial user attrs: ``rwb:unit`` (unit key), ``rwb:unit_def`` (the unit), ``rwb:search`` (the
  search config), ``rwb:result`` (a :class:`~retrieval.tune.results.PointResult`), and on a
  trial that was not measured ``rwb:note``;
- trial system attr ``rwb:worker``: the worker that holds (or held) the trial;
- study user attrs ``rwb:done:<unit>``: the unit's :class:`~retrieval.tune.results.UnitResult`,
  written before its last trial is told; ``rwb:hb:<worker>``: heartbeats (seconds since epoch).

Claiming work is Optuna's own atomic step (a WAITING trial set to RUNNING succeeds for exactly
one worker). A unit in progress always has a WAITING or RUNNING trial: its owner records the
measured point on its trial (system attr ``rwb:recorded``, the objective value, written last),
then creates the next trial (or decides the unit), then tells the current one. A RUNNING trial
whose worker died is *stale*: recorded in full, it is completed with its own measurement (a
unit decided just before its worker died keeps every probe); otherwise it is marked FAIL and
its unit re-queued from its finished trials, which are kept.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from retrieval.tune.results import PointResult, UnitResult
from retrieval.tune.units import Unit, canon

log = logging.getLogger(__name__)

UNIT = "rwb:unit"
UNIT_DEF = "rwb:unit_def"
SEARCH = "rwb:search"
RESULT = "rwb:result"
NOTE = "rwb:note"
VALUE = "rwb:value"
WORKER = "rwb:worker"
#: trial user attr: wall seconds the worker spent on this point (its share of the build, the
#: measurement and, for a unit's last point, the decision); summed into node-hours per config
NODE_S = "rwb:node_s"
#: trial system attr: the objective value of a point whose measurement is recorded in full on
#: its trial (written last by :meth:`Book.record`); a stale trial carrying it is completed
RECORDED = "rwb:recorded"
DONE = "rwb:done:"
HEARTBEAT = "rwb:hb:"
PLAN_DONE = "rwb:plan_done"
CONSTRAINT = "recall_lb"
#: the system attr optuna-dashboard reads a trial's constraints from (a list, feasible when
#: every value is <= 0); Optuna itself reads it too, beside its own named ``constraints:<key>``
DASHBOARD_CONSTRAINTS = "constraints"
#: study user attrs that say what the objective and the constraint are (shown by the dashboard)
OBJECTIVE_ATTR = "rwb:objective"
CONSTRAINT_ATTR = "rwb:constraint"


# --- workers ------------------------------------------------------------------------------------
def this_worker() -> str:
    """``host:pid:start`` of this process (start = process creation time, s since epoch)."""
    import psutil

    start = psutil.Process(os.getpid()).create_time()
    return f"{socket.gethostname()}:{os.getpid()}:{start:.2f}"


def alive(worker: str, heartbeats: Mapping[str, Any], grace_s: float) -> bool:
    """Whether ``worker`` still runs: on this host by its pid and start time, elsewhere by a
    heartbeat (or its start) younger than ``grace_s`` seconds."""
    import psutil

    try:
        host, pid_s, start_s = worker.rsplit(":", 2)
        pid, start = int(pid_s), float(start_s)
    except ValueError:
        return True  # not ours to judge
    if host == socket.gethostname():
        try:
            proc = psutil.Process(pid)
            return proc.status() != psutil.STATUS_ZOMBIE and abs(proc.create_time() - start) < 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False
    last = max(float(heartbeats.get(HEARTBEAT + worker, 0.0)), start)
    return time.time() - last < grace_s


#: flat per-trial user attributes beside the ``rwb:result`` dict (optuna-dashboard shows a
#: trial's user attributes as columns and plots numeric ones; a dict is one opaque string)
FLAT_ATTRS = ("recall", "recall_lower", "p95_ms", "qps")


def flat_attrs(result: PointResult) -> dict[str, float]:
    """``recall`` (mean recall@k, 0..1), ``recall_lower`` (its lower confidence bound),
    ``p95_ms`` (single-query p95 latency, ms), ``qps`` of a measured point; a value the point
    does not have (None) is left out."""
    values = {"recall": result.recall, "recall_lower": result.recall_lb,
              "p95_ms": result.p95_ms, "qps": result.qps}
    return {k: float(v) for k, v in values.items() if v is not None}


class Heartbeat:
    """A daemon thread writing this worker's heartbeat into the study every ``interval_s``."""

    def __init__(self, study: Any, worker: str, interval_s: float = 30.0) -> None:
        self._study, self._worker, self._interval = study, worker, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rwb-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._study.set_user_attr(HEARTBEAT + self._worker, time.time())
            except Exception as exc:  # a missed heartbeat is not fatal
                log.warning("heartbeat not written: %s", (str(exc).splitlines() or [""])[0])
            self._stop.wait(self._interval)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# --- units in trials ----------------------------------------------------------------------------
def unit_to_dict(u: Unit) -> dict[str, Any]:
    d = dataclasses.asdict(u)
    d["grid"] = [dict(s) for s in u.grid]
    return d


def unit_from_dict(d: Mapping[str, Any]) -> Unit:
    data = dict(d)
    data["grid"] = tuple(dict(s) for s in data.get("grid", ()))
    data["ladder2"] = tuple(int(v) for v in data.get("ladder2", ()))
    return Unit(**data)


class Book:
    """Reads and writes rwb trials of one study for one worker."""

    def __init__(self, study: Any, storage: Any, worker: str) -> None:
        self.study = study
        self.storage = storage
        self.worker = worker
        self.study_id = storage.get_study_id_from_name(study.study_name)

    # --- reading ---
    def trials(self, states: Iterable[Any] | None = None) -> list[Any]:
        return list(
            self.storage.get_all_trials(
                self.study_id, deepcopy=False, states=tuple(states) if states else None
            )
        )

    def attrs(self) -> dict[str, Any]:
        return dict(self.storage.get_study_user_attrs(self.study_id))

    def done(self, attrs: Mapping[str, Any] | None = None) -> dict[str, UnitResult]:
        attrs = self.attrs() if attrs is None else attrs
        return {
            k[len(DONE):]: UnitResult.from_dict(v) for k, v in attrs.items() if k.startswith(DONE)
        }

    def points(self, unit_key: str, trials: Iterable[Any] | None = None) -> dict[str, PointResult]:
        """Finished measurements of a unit, keyed by :func:`canon` of the search config."""
        from optuna.trial import TrialState

        out: dict[str, PointResult] = {}
        for t in trials if trials is not None else self.trials((TrialState.COMPLETE,)):
            ua = t.user_attrs
            if t.state == TrialState.COMPLETE and ua.get(UNIT) == unit_key and RESULT in ua:
                out[canon(ua[SEARCH])] = PointResult.from_dict(ua[RESULT])
        return out

    # --- claiming ---
    def try_pop(self, trial: Any) -> bool:
        """Atomically take a WAITING trial (True for exactly one worker)."""
        from optuna.exceptions import StorageInternalError, UpdateFinishedTrialError
        from optuna.trial import TrialState

        try:
            ok = self.storage.set_trial_state_values(trial._trial_id, state=TrialState.RUNNING)
        except UpdateFinishedTrialError:
            return False
        except StorageInternalError as exc:  # e.g. SQLite busy: someone else is writing
            log.debug("pop of trial %d failed: %s", trial.number, exc)
            return False
        if ok:
            self.storage.set_trial_system_attr(trial._trial_id, WORKER, self.worker)
        return bool(ok)

    def pop(self, prefer: Callable[[Any], bool] = lambda t: False) -> Any | None:
        """Take one WAITING trial, preferred ones first (e.g. those whose index is built)."""
        from optuna.trial import TrialState

        waiting = self.trials((TrialState.WAITING,))
        waiting.sort(key=lambda t: (not prefer(t), t.number))
        for t in waiting:
            if self.try_pop(t):
                return t
        return None

    # --- writing ---
    def _frozen(self, state: Any, unit: Unit, search: Mapping[str, Any], params: Any) -> Any:
        from optuna.trial import create_trial

        p, dists = params
        return create_trial(
            state=state,
            params=p,
            distributions=dists,
            user_attrs={UNIT: unit.key, UNIT_DEF: unit_to_dict(unit), SEARCH: dict(search)},
            system_attrs={} if state.name == "WAITING" else {WORKER: self.worker},
        )

    def enqueue(self, unit: Unit, search: Mapping[str, Any], params: Any) -> None:
        """Queue a point for any worker to take."""
        from optuna.trial import TrialState

        self.study.add_trial(self._frozen(TrialState.WAITING, unit, search, params))

    def create_running(self, unit: Unit, search: Mapping[str, Any], params: Any) -> int:
        """A trial held by this worker from the start (no one else can take it)."""
        from optuna.trial import TrialState

        frozen = self._frozen(TrialState.RUNNING, unit, search, params)
        return int(self.storage.create_new_trial(self.study_id, template_trial=frozen))

    def label_trial(self, trial_id: int, unit: Unit, search: Mapping[str, Any]) -> None:
        """Attach the rwb attrs to a trial that came from ``study.ask()``."""
        self.storage.set_trial_system_attr(trial_id, WORKER, self.worker)
        self.storage.set_trial_user_attr(trial_id, UNIT, unit.key)
        self.storage.set_trial_user_attr(trial_id, UNIT_DEF, unit_to_dict(unit))
        self.storage.set_trial_user_attr(trial_id, SEARCH, dict(search))

    def record(
        self,
        trial_id: int,
        result: PointResult,
        value: float,
        value_name: str,
        target: float | None,
        node_s: float | None = None,
    ) -> None:
        """Write a measured point onto its RUNNING trial, with the recall constraint and the
        worker's wall seconds spent on it (``node_s``); ``value`` (the objective) last, as the
        mark that the record is whole. Not told yet: see :meth:`tell_recorded`."""
        import optuna

        trial = optuna.Trial(self.study, trial_id)
        self.storage.set_trial_user_attr(trial_id, RESULT, result.to_dict())
        if node_s is not None:
            self.storage.set_trial_user_attr(trial_id, NODE_S, float(node_s))
        self.storage.set_trial_user_attr(trial_id, VALUE, value_name)
        for key, v in flat_attrs(result).items():  # columns optuna-dashboard can sort and plot
            self.storage.set_trial_user_attr(trial_id, key, v)
        if target is not None:
            slack = float(target - result.recall_lb)
            trial.set_constraint(CONSTRAINT, slack)
            self.storage.set_trial_system_attr(trial_id, DASHBOARD_CONSTRAINTS, [slack])
        self.storage.set_trial_system_attr(trial_id, RECORDED, float(value))

    def tell_recorded(self, trial_id: int, value: float) -> None:
        """Tell (COMPLETE) a trial whose point :meth:`record` wrote."""
        import optuna

        self.study.tell(optuna.Trial(self.study, trial_id), value)

    def finish(
        self,
        trial_id: int,
        result: PointResult,
        value: float,
        value_name: str,
        target: float | None,
        node_s: float | None = None,
    ) -> None:
        """Record a measured point and tell it (COMPLETE): :meth:`record` then
        :meth:`tell_recorded`."""
        self.record(trial_id, result, value, value_name, target, node_s)
        self.tell_recorded(trial_id, value)

    def complete_recorded(self, trial_id: int, note: str) -> bool:
        """Complete a RUNNING trial whose point was recorded in full (its worker died or was
        interrupted before telling it), with ``note``; False when it is not recorded or is
        already finished."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        value = self.storage.get_trial_system_attrs(trial_id).get(RECORDED)
        if value is None:
            return False
        try:
            self.storage.set_trial_user_attr(trial_id, NOTE, note)
            return bool(self.storage.set_trial_state_values(
                trial_id, state=TrialState.COMPLETE, values=[float(value)]))
        except UpdateFinishedTrialError:
            return False

    def describe(self, metric_name: str, description: str, target: float | None) -> None:
        """Name the study's objective (``study.metric_names``, with its unit) and say what the
        constraint is, for optuna-dashboard and anyone opening the storage."""
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # set_metric_names is "experimental" in Optuna 5
            self.study.set_metric_names([metric_name])
        self.study.set_user_attr(OBJECTIVE_ATTR, f"{metric_name}: {description}")
        if target is not None:
            self.study.set_user_attr(
                CONSTRAINT_ATTR,
                f"{CONSTRAINT} = target recall {target} - lower confidence bound of recall; "
                f"feasible when <= 0 (trial constraints)",
            )

    def fail(self, trial_id: int, note: str) -> None:
        """Close a trial that was not (fully) measured, saying why."""
        import optuna
        from optuna.trial import TrialState

        try:
            self.storage.set_trial_user_attr(trial_id, NOTE, note)
            self.study.tell(optuna.Trial(self.study, trial_id), state=TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass

    def prune(self, trial_id: int, note: str) -> None:
        import optuna
        from optuna.trial import TrialState

        self.storage.set_trial_user_attr(trial_id, NOTE, note)
        self.study.tell(optuna.Trial(self.study, trial_id), state=TrialState.PRUNED)

    def mark_done(self, unit: Unit, result: UnitResult) -> None:
        self.study.set_user_attr(DONE + unit.key, result.to_dict())

    def fail_stale(self, grace_s: float) -> list[str]:
        """Close the RUNNING trials of dead workers: COMPLETE when their point was recorded in
        full (:meth:`record`), else FAIL; returns the keys of their units."""
        from optuna.exceptions import StorageInternalError, UpdateFinishedTrialError
        from optuna.trial import TrialState

        attrs = self.attrs()
        units = []
        for t in self.trials((TrialState.RUNNING,)):
            owner = t.system_attrs.get(WORKER)
            if owner is None or owner == self.worker or alive(owner, attrs, grace_s):
                continue
            try:
                if RECORDED in t.system_attrs and self.complete_recorded(
                        t._trial_id, f"stale: worker {owner} died after recording this point "
                                     f"(completed with its own measurement)"):
                    log.info("trial %d of dead worker %s completed from its record", t.number,
                             owner)
                    units.append(str(t.user_attrs.get(UNIT)))
                    continue
                self.storage.set_trial_user_attr(t._trial_id, NOTE, f"stale: worker {owner} died")
                if self.storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL):
                    log.info("trial %d of dead worker %s marked FAIL", t.number, owner)
                    units.append(str(t.user_attrs.get(UNIT)))
            except (UpdateFinishedTrialError, StorageInternalError):
                continue
        return units
