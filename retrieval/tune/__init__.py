"""Tuning: strategies (grid, target search on a monotone knob, Optuna), honest decisions
(confidence bounds, held-out queries), Pareto fronts and shared Optuna storage.

Modules, one job each:

- :mod:`~retrieval.tune.config`: the ``tune:`` block of a sweep spec (pydantic);
- :mod:`~retrieval.tune.decide`: lower confidence bounds on recall, the query split, "cheapest";
- :mod:`~retrieval.tune.target`: galloping + bisection on a monotone knob (pure);
- :mod:`~retrieval.tune.units`: what a sweep evaluates (units of work, their points, Optuna
  params);
- :mod:`~retrieval.tune.results`: what is recorded per point and per unit (JSON round trip);
- :mod:`~retrieval.tune.measure`: the one measurer: full / probe / held-out measurements on a
  built index, and a unit's point and decision for any workload;
- :mod:`~retrieval.tune.filterbench`: timing filtered searches (each query with its filter);
- :mod:`~retrieval.tune.retrieved`: the retrieved ids per query, as the caller's ids;
- :mod:`~retrieval.tune.storage`: Optuna storages by URL, studies bound to one spec;
- :mod:`~retrieval.tune.trials`: reading and writing rwb trials, worker liveness, heartbeats;
- :mod:`~retrieval.tune.worker`: the worker loop that claims units and measures them;
- :mod:`~retrieval.tune.optuna_search`: the sampler-driven ``optuna`` strategy;
- :mod:`~retrieval.tune.pareto`: Pareto fronts;
- :mod:`~retrieval.tune.summary` and :mod:`~retrieval.tune.sweep`: summary.json and the run.

Importing this package does not import Optuna.
"""

from retrieval.tune.config import ConfidenceSpec, TuneSpec

__all__ = ["ConfidenceSpec", "TuneSpec"]
