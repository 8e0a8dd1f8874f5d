"""The ``tune:`` block of a sweep spec: how a sweep searches and how it decides.

Every field has a default, so a spec without ``tune:`` runs the ``grid`` strategy. The target
recall itself is the spec's top-level ``target_recall`` (recall@k by id, in (0, 1]).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Strategy = Literal["grid", "target", "optuna"]
STRATEGIES: tuple[str, ...] = ("grid", "target", "optuna")
Objective = Literal["p95_ms", "qps", "bytes_per_vector"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfidenceSpec(_Model):
    """A config meets the target only if a one-sided lower confidence bound on its mean recall
    (over the tuning queries) is >= the target.

    - ``bootstrap``: percentile bootstrap over queries (``resamples`` draws, seeded);
    - ``binomial``: Wilson score bound treating the ``n_queries * k`` result slots as
      independent trials (tighter, but optimistic when queries differ in difficulty).
    ``level`` is the one-sided confidence level (0.95 = the bound is exceeded 95% of the time).
    """

    method: Literal["bootstrap", "binomial"] = "bootstrap"
    level: float = Field(0.95, ge=0.5, lt=1.0)
    resamples: int = Field(2000, ge=100, le=100_000)


class ScreenSpec(_Model):
    """``tune.build_screen``: every build candidate is first built and searched on a seeded
    sample of ``fraction`` of the base (the same tuning queries, their ground truth on the
    sample); a candidate is dropped when its ceiling there (recall lower bound at the top of
    its search range) is below the target, or when its cost at the target there (batch ms per
    query at its cheapest knob meeting it, the fastest of 5 passes) exceeds the best
    candidate's by more than ``cost_margin`` (1.0: twice the best). See
    :mod:`retrieval.tune.screen`."""

    fraction: float = Field(0.1, gt=0.0, lt=1.0)
    cost_margin: float = Field(1.0, ge=0.0)


class CostSpec(_Model):
    """Prices for the monthly cost of an operating point: ``ram_gb_month`` / ``disk_gb_month``
    in the user's currency per GB (10**9 bytes) per month; ``n``: the number of vectors the
    deployment will hold (default: the dataset's)."""

    ram_gb_month: float = Field(ge=0.0)
    disk_gb_month: float = Field(0.0, ge=0.0)
    n: int | None = Field(None, ge=1)


class TuneSpec(_Model):
    """How ``rwb sweep`` searches (``strategy``) and decides (``confidence``, held-out split).

    - ``strategy``: ``grid`` (every listed value), ``target`` (per build, the smallest value of
      the monotone search knob meeting the target, by galloping + bisection over its range) or
      ``optuna`` (a sampler picks build configs; each is solved by ``target``).
    - ``objective``: what "cheapest" minimises: ``p95_ms`` (single-query p95 latency, ms),
      ``qps`` (batch throughput, maximised) or ``bytes_per_vector`` (the measured resident bytes
      of the index per vector, see :mod:`retrieval.memory`; ties by p95).
    - ``slo_p95_ms``: a point whose single-query p95 (ms) exceeds it is not chosen.
    - ``memory``: ``reported`` (the backend's own figure) or ``resident`` (measured in a clean
      subprocess, see :mod:`retrieval.memory`); objective ``bytes_per_vector`` implies
      ``resident``.
    - ``rescore_knobs``: backend name or label -> a second monotone knob (``k_factor``,
      ``oversampling``) solved jointly with the first by :mod:`retrieval.tune.joint`.
    - ``cost``: prices for the monthly cost of each chosen point (:class:`CostSpec`).
    - ``heldout_fraction``: share of the queries held out from tuning and used only to
      re-measure the chosen configs (0 disables the held-out check).
    - ``knobs``: backend name or index label -> the monotone search knob to tune (default: the
      backend's first knob that applies to the build).
    - ``search_range``: knob name -> ``[low, high]`` (inclusive) searched by ``target``/``optuna``
      (default: the backend's allowed range, up to its most accurate setting).
    - ``sampler`` / ``n_trials``: the Optuna sampler and how many build configs it proposes.
    - ``build_search``: ``full`` (every build config of the grid is built) or ``derived`` (per
      group of builds differing only in a derivable param, Faiss HNSW's ``M`` or Faiss IVF's
      ``nlist``: the largest is built and the others are derived from it, by pruning the graph
      or by merging the centroids; see :mod:`retrieval.tune.derived`; the
      answer's build is then built for real, its shortcut error measured and the grid
      re-ranked at the real build's cost, at most 3 such checks).
    - ``dominated_builds``: with ``build_search: derived`` and the target strategy, ``skip``
      (the default) does not build a build whose dominant param (HNSW's ``ef_construction``)
      is below the largest of its group, the rest of its build being equal (a larger
      ``ef_construction`` is taken never to search worse; listed in ``pruned`` with
      ``reason: dominated``); ``build``: build them all.
    - ``concurrent_builds``: how many independent builds (the full builds and the sources of
      derived ones) run at once before the search starts, in threads of one worker (Faiss and
      hnswlib release the GIL); each gets ``build threads // concurrent_builds`` threads so the
      total stays the build threads (``index_build.threads``, default every core). ``1``: one
      build at a time, as needed (the default); ``auto``: as many as there are builds, at most
      the build threads. All builds of the grid are then held in memory at once.
    - ``build_screen``: early stopping of build candidates on a nested sample
      (:class:`ScreenSpec`; target strategy, unfiltered sweeps); the summary's ``pruned`` lists
      the dropped ones, why and at what sample size.
    - ``query_subset``: share of the tuning queries (0 < s <= 1) the knob search runs on,
      chosen to keep the per-query recall distribution (stratified by each query's recall at
      one probe); the chosen config is re-measured on every tuning query (the lower bound) and
      the held-out check is unchanged. ``1``: every tuning query (the default).
    """

    strategy: Strategy = "grid"
    objective: Objective = "p95_ms"
    slo_p95_ms: float | None = Field(None, gt=0.0)
    memory: Literal["reported", "resident"] = "reported"
    rescore_knobs: dict[str, str] = Field(default_factory=dict)
    cost: CostSpec | None = None
    confidence: ConfidenceSpec = Field(default_factory=ConfidenceSpec)
    heldout_fraction: float = Field(0.5, ge=0.0, le=0.9)
    knobs: dict[str, str] = Field(default_factory=dict)
    search_range: dict[str, tuple[int, int]] = Field(default_factory=dict)
    sampler: Literal["tpe", "nsga2"] = "tpe"
    n_trials: int = Field(20, ge=1, le=100_000)
    build_search: Literal["full", "derived"] = "full"
    dominated_builds: Literal["skip", "build"] = "skip"
    concurrent_builds: int | Literal["auto"] = 1
    build_screen: ScreenSpec | None = None
    query_subset: float = Field(1.0, gt=0.0, le=1.0)

    @field_validator("concurrent_builds")
    @classmethod
    def _concurrency_positive(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"must be an integer >= 1 or 'auto'; received {v}")
        return v

    @field_validator("search_range")
    @classmethod
    def _ranges_not_empty(cls, v: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        for knob, (low, high) in v.items():
            if low > high:
                raise ValueError(
                    f"'{knob}' is an empty range: it must be [low, high] with low <= high; "
                    f"received [{low}, {high}]"
                )
            if low < 1:
                raise ValueError(
                    f"'{knob}' must start at an integer >= 1; received [{low}, {high}]"
                )
        return v


#: fields that may change when a study is resumed (a budget, or how indexes are built: build
#: threads, the build cache; not what is measured)
def measures_resident(tune: TuneSpec) -> bool:
    """Whether a sweep measures resident memory (a subprocess per build)."""
    return tune.memory == "resident" or tune.objective == "bytes_per_vector"


RESUMABLE_FIELDS: tuple[str, ...] = ("tune.n_trials", "index_build", "tune.concurrent_builds")
