"""The ``optuna`` strategy: a sampler (TPE or NSGA-II, seeded) proposes build configs (and the
non-monotone search params); each proposal is solved by a target search on its monotone knob.

The proposal is an asked trial (``study.ask()``) that becomes the unit's first point: the most
accurate knob value, so a build that cannot reach the target is infeasible after one evaluation.
Every further point is a trial too, with the recall constraint set (``trial.set_constraint``;
feasible when ``target - recall_lb <= 0``), so the sampler learns from all of them.
A proposal of a build already tried is closed as PRUNED (not measured). ``n_trials`` counts
distinct build configs.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any

from retrieval.tune import trials as tr
from retrieval.tune.config import TuneSpec
from retrieval.tune.spec import SweepSpec, checked_entries
from retrieval.tune.units import Unit, make_unit, monotone_knob, target_fixed_grid
from retrieval.tune.worker import Claim

log = logging.getLogger(__name__)

#: proposals in a row that may repeat a known unit before the worker stops asking
MAX_REPEATS = 50


def optuna_sampler(kind: str, seed: int, *, population_size: int | None = None,
                   parallel: bool = False) -> Any:
    """The one Optuna sampler factory: ``nsga2`` | ``tpe`` | ``random``, seeded. ``parallel``
    (the sweep worker): multivariate grouped TPE with the constant liar, for several workers
    on one study."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # multivariate/group/constant_liar are "experimental"
        if kind == "nsga2":
            if population_size is None:
                return optuna.samplers.NSGAIISampler(seed=seed)
            return optuna.samplers.NSGAIISampler(population_size=population_size, seed=seed)
        if kind == "tpe" and parallel:
            return optuna.samplers.TPESampler(
                seed=seed, multivariate=True, group=True, constant_liar=True
            )
        if kind == "tpe":
            return optuna.samplers.TPESampler(seed=seed)
        return optuna.samplers.RandomSampler(seed=seed)


def make_sampler(tune: TuneSpec, seed: int) -> Any:
    """The sweep worker's sampler (``tune.sampler``: tpe | nsga2)."""
    return optuna_sampler("nsga2" if tune.sampler == "nsga2" else "tpe", seed, parallel=True)


def _choices(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def space_size(spec: SweepSpec, labels: Sequence[str]) -> int:
    """How many distinct units the sampler can propose."""
    total = 0
    for i, checked in enumerate(checked_entries(spec)):
        for bp in checked.builds():
            knob = monotone_knob(checked.cls, bp, spec.k, spec.tune, labels[i])
            n = len(target_fixed_grid(spec, i, knob)) if knob else len(checked.search_grid)
            total += n
    return total


class Proposer:
    def __init__(self, spec: SweepSpec, labels: Sequence[str], book: tr.Book) -> None:
        self.spec, self.labels, self.book = spec, list(labels), book
        self.n_trials = spec.tune.n_trials
        self.size = space_size(spec, labels)
        self._repeats = 0

    def started(self) -> set[str]:
        return {
            str(t.user_attrs[tr.UNIT]) for t in self.book.trials() if tr.UNIT in t.user_attrs
        }

    def budget_left(self) -> bool:
        return (
            len(self.started()) < min(self.n_trials, self.size) and self._repeats < MAX_REPEATS
        )

    def propose(self) -> Claim | None:
        study = self.book.study
        while self.budget_left():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trial = study.ask()
            tid = trial._trial_id
            if tr.UNIT in trial.user_attrs:  # a queued rwb point (a resumed unit)
                self.book.storage.set_trial_system_attr(tid, tr.WORKER, self.book.worker)
                unit = tr.unit_from_dict(trial.user_attrs[tr.UNIT_DEF])
                return Claim(unit, tid, dict(trial.user_attrs[tr.SEARCH]))
            unit, search = self._suggest(trial)
            if unit.key in self.started():
                self._repeats += 1
                self.book.prune(tid, f"not measured: build already proposed (unit {unit.key})")
                continue
            self._repeats = 0
            self.book.label_trial(tid, unit, search)
            return Claim(unit, tid, search)
        return None

    def _suggest(self, trial: Any) -> tuple[Unit, dict[str, Any]]:
        spec = self.spec
        label = trial.suggest_categorical("index", self.labels)
        i = self.labels.index(label)
        entry = spec.indexes[i]
        checked = checked_entries(spec)[i]
        build = {
            name: trial.suggest_categorical(f"{label}.build.{name}", _choices(axis))
            for name, axis in entry.build.items()
        }
        bp = checked.build(build)
        knob = monotone_knob(checked.cls, bp, spec.k, spec.tune, label)
        fixed = {
            name: trial.suggest_categorical(f"{label}.search.{name}", _choices(axis))
            for name, axis in entry.search.items()
            if name != knob
        }
        if knob is None:  # nothing to search: the proposal is one config
            unit = Unit(i, entry.backend, label, build, {}, "grid", None, 0, 0, (fixed,))
            return unit, fixed
        unit = make_unit(spec, i, label, build, fixed, "target")
        trial.suggest_int(f"{label}.search.{knob}", unit.high, unit.high)
        return unit, unit.point(unit.high)
