"""Optuna multi-objective search over (knob value, rerank depth, cache threshold).

Objectives on the tuning split: end-to-end nDCG@k (maximise), p95 latency in ms (minimise),
USD per 1,000 queries (minimise). Constraints through ``trial.set_constraint`` (feasible when
<= 0): the recall target and the false-hit cap (see :mod:`retrieval.study.combine`). Every
trial is a table lookup, so a study of a few hundred trials takes seconds; the grid is small
enough to also score exhaustively, which tells how much of the true front the sampler found.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from retrieval.study.combine import Config, Outcome, Scorer, objectives, pareto_indices
from retrieval.study.spec import StudySpec
from retrieval.tune.optuna_search import optuna_sampler

log = logging.getLogger(__name__)

DIRECTIONS: tuple[Literal["maximize", "minimize"], ...] = ("maximize", "minimize", "minimize")
OBJECTIVE_NAMES = ("ndcg_e2e", "p95_ms", "usd_per_1k")


@dataclass(frozen=True)
class ParetoPoint:
    config: Config
    tuning: Outcome
    trial: int | None = None

    def as_dict(self, knob_name: str) -> dict[str, Any]:
        return {"trial": self.trial, **self.config.as_dict(knob_name),
                "tuning": self.tuning.as_dict()}


def make_sampler(spec: StudySpec) -> Any:
    o = spec.optuna
    return optuna_sampler(o.sampler, spec.seed, population_size=o.population_size)


def run_optuna(
    spec: StudySpec,
    scorer: Scorer,
    *,
    storage: str | None,
    study_name: str,
    n_trials: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """Create (or resume) the study and run ``n_trials`` more trials on the tuning split."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        storage=storage, study_name=study_name, directions=list(DIRECTIONS),
        sampler=make_sampler(spec), load_if_exists=True,
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # set_metric_names is "experimental" in Optuna 5
        study.set_metric_names(list(OBJECTIVE_NAMES))  # columns named with their units
    knob = spec.retrieval.index.knob
    values, depths, thresholds = (spec.retrieval.index.values, spec.rerank.depths,
                                  spec.thresholds)
    total = n_trials or spec.optuna.n_trials

    def objective(trial: Any) -> tuple[float, float, float]:
        cfg = Config(
            knob=int(trial.suggest_categorical(knob, values)),
            depth=int(trial.suggest_categorical("depth", depths)),
            threshold=float(trial.suggest_categorical("threshold", thresholds)),
        )
        o = scorer.score(cfg, "tuning")
        trial.set_constraint("recall", o.recall_violation)
        trial.set_constraint("false_hit", o.false_hit_violation)
        # the list optuna-dashboard reads (it does not read Optuna 5's named constraints)
        trial.storage.set_trial_system_attr(
            trial._trial_id, "constraints",
            [float(o.recall_violation), float(o.false_hit_violation)],
        )
        for key, value in o.as_dict().items():
            trial.set_user_attr(key, value)
        if progress is not None:
            progress(trial.number + 1, total)
        return objectives(o)

    study.optimize(objective, n_trials=total, gc_after_trial=False)
    return study


def config_of(trial: Any, knob: str) -> Config:
    p = trial.params
    return Config(int(p[knob]), int(p["depth"]), float(p["threshold"]))


def optuna_front(study: Any, spec: StudySpec, scorer: Scorer) -> list[ParetoPoint]:
    """The feasible Pareto set Optuna reports (``study.best_trials`` honours the constraints),
    one point per distinct config, by decreasing nDCG."""
    knob = spec.retrieval.index.knob
    seen: dict[Config, ParetoPoint] = {}
    for t in study.best_trials:
        cfg = config_of(t, knob)
        seen.setdefault(cfg, ParetoPoint(cfg, scorer.score(cfg, "tuning"), t.number))
    return sorted(seen.values(), key=lambda p: (-p.tuning.ndcg_e2e, p.tuning.usd_per_1k))


def exhaustive_front(spec: StudySpec, scorer: Scorer) -> tuple[list[ParetoPoint], int, int]:
    """(feasible front of the whole grid, grid size, feasible configs) on the tuning split."""
    feasible: list[ParetoPoint] = []
    n = 0
    for v in spec.retrieval.index.values:
        for d in spec.rerank.depths:
            for t in spec.thresholds:
                n += 1
                cfg = Config(v, d, t)
                o = scorer.score(cfg, "tuning")
                if o.feasible:
                    feasible.append(ParetoPoint(cfg, o))
    idx = pareto_indices([objectives(p.tuning) for p in feasible])
    front = sorted((feasible[i] for i in idx),
                   key=lambda p: (-p.tuning.ndcg_e2e, p.tuning.usd_per_1k))
    return front, n, len(feasible)


def choose(front: list[ParetoPoint], tolerance: float) -> ParetoPoint | None:
    """Lowest cost, then p95, among front points within ``tolerance`` of the best nDCG."""
    if not front:
        return None
    best = max(p.tuning.ndcg_e2e for p in front)
    near = [p for p in front if p.tuning.ndcg_e2e >= best - tolerance - 1e-12]
    return min(near, key=lambda p: (p.tuning.usd_per_1k, p.tuning.p95_ms))


__all__ = [
    "DIRECTIONS",
    "OBJECTIVE_NAMES",
    "ParetoPoint",
    "choose",
    "config_of",
    "exhaustive_front",
    "optuna_front",
    "run_optuna",
]
