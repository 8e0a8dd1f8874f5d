"""Sweep specs: YAML -> pydantic (extra="forbid"), validated per backend before anything runs.

A spec names a dataset, k, and for each index backend the build and search params to try. A list
value is a grid axis; a scalar is fixed. Every entry is validated once by
:func:`retrieval.indexes.entry.check_entry` (the backend's parameter models, and the cross-field
checks such as ef_search >= k or nprobe <= nlist on every build x search combination); any error
names the file, the field, what is allowed and what was received. The validated params
(:func:`checked_entries`) travel with the sweep's units of work, which trust them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from retrieval.adaptive.spec import AdaptiveSpec
from retrieval.filtering.spec import FilterSpec
from retrieval.indexes.entry import CheckedEntry, GridValue, Scalar, check_entry, expand
from retrieval.indexes.entry import IndexEntry as BaseEntry
from retrieval.params import Params, RunName, Seed
from retrieval.specfile import load_model
from retrieval.stats.noninferiority import QUALITY_KEYS, QualityTarget
from retrieval.tune.config import TuneSpec
from retrieval.tune.scale import ScaleSpec
from retrieval.tune.tenants import TenantsSpec
from retrieval.tune.topology import TopologySpec

#: the recall target solved beside a quality target when the spec gives no ``target_recall``
DEFAULT_QUALITY_RECALL = 0.95


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IndexBuildSpec(SpecModel):
    """How indexes are built (not what: that is each entry's ``build``).

    - ``threads``: build threads (None: every CPU this process may use); the spec's top-level
      ``threads`` is for searches. More than one build thread makes HNSW builds irreproducible
      (insertion order varies); ``threads: 1`` for reproducible builds.
    - ``cache``: load built indexes from the on-disk build cache
      (:mod:`retrieval.indexes.buildcache`) and save new ones there (the environment's
      ``RWB_INDEX_CACHE=off`` disables it whatever this says);
    - ``cache_max_mb``: the cache's size limit in MB = 10**6 bytes (default
      ``$RWB_INDEX_CACHE_MAX_MB`` or 4096), kept by evicting the least recently used entries.
    """

    threads: int | None = Field(None, ge=1, le=512)
    cache: bool = True
    cache_max_mb: float | None = Field(None, gt=0)


class IndexEntry(BaseEntry):
    """One backend with its build grid and search grid (and an optional label)."""

    label: str | None = None


class SweepSpec(SpecModel):
    """A sweep/eval spec. Times are in ms/s as named; recall is recall@k by id."""

    #: the run's name (run directory ``runs/<name>-<time>``, the Optuna study's name)
    name: RunName = "sweep"
    #: a dataset name (``rwb datasets``), a manifest path, or a mapping: ``{name: N, field:
    #: value}`` overrides fields of a named one, ``{kind: npy, base: b.npy, queries: q.npy,
    #: metric: cosine}`` (or ``synthetic`` / ``hdf5`` / ``texmex`` / ``text``) gives one inline
    dataset: str | dict[str, Any]
    #: results per query; recall is recall@k
    k: int = Field(10, ge=1, le=1000)
    #: seeds the query split, sampling and seeded builds
    seed: Seed = 0
    #: search threads (``threads`` of each library; batch mode uses them)
    threads: int = Field(1, ge=1, le=512)
    #: build threads and the build cache (``threads`` above is for searches)
    index_build: IndexBuildSpec = Field(default_factory=IndexBuildSpec)
    #: what is timed: ``single`` (one query per call: p50/p95/p99 ms) and ``batch`` (QPS)
    modes: list[Literal["single", "batch"]] = Field(
        default_factory=lambda: ["single", "batch"]  # type: ignore[arg-type]
    )
    #: queries searched before timing starts
    warmup: int = Field(32, ge=0)
    #: timed batch passes; the best one is reported
    batch_repeats: int = Field(3, ge=1, le=100)
    #: recall@k target in (0, 1]; with a target and no ``tune.strategy``, ``rwb sweep`` runs
    #: ``target`` (the cheapest setting whose recall lower bound meets it)
    target_recall: float | None = Field(None, gt=0.0, le=1.0)
    #: a target in the user's metric (retrieval.tune.quality): ``{ndcg_non_inferior: M}`` (or
    #: ``mrr_non_inferior`` / ``recall@100_non_inferior``); the recall target
    #: (``target_recall``, default 0.95 then) is solved beside it
    target: QualityTarget | None = None
    #: the indexes: each a ``backend`` (``rwb backends``) with ``build`` and ``search`` params,
    #: a list value being a grid
    indexes: list[IndexEntry] = Field(min_length=1)
    #: tuning options (strategy, confidence, held-out split, ...); see retrieval.tune.config
    tune: TuneSpec = Field(default_factory=TuneSpec)
    #: filtered-search workload (retrieval.filtering.spec); absent: unfiltered, as before
    filters: FilterSpec | None = None
    #: a scale study (retrieval.tune.scale): tune on nested samples, predict the knob at full N
    scale: ScaleSpec | None = None
    #: a tenants study (retrieval.tune.tenants): layouts compared per tenant
    tenants: TenantsSpec | None = None
    #: a topology study (retrieval.tune.topology): the same data as N segments, top-k merged
    topology: TopologySpec | None = None
    #: a cold run (retrieval.tune.cold): index file pages dropped before the first queries
    cold: bool = False
    #: a registered workload kind without a section of its own, by name
    #: (:mod:`retrieval.tune.workloads`); absent: the kind the sections above declare
    workload: str | None = None
    #: adaptive per-query policies (retrieval.adaptive), judged against the tuned fixed
    #: ef_search on the held-out queries
    adaptive: AdaptiveSpec | None = None

    # set by load_spec; not part of the YAML
    source: str = Field("<memory>", exclude=True)

    @model_serializer(mode="wrap")
    def _no_empty_filters(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An unfiltered spec dumps exactly as before (no ``filters`` key; no ``scale`` key
        without a scale study)."""
        out: dict[str, Any] = handler(self)
        for key in ("filters", "scale", "tenants", "topology", "workload", "target",
                    "adaptive"):
            if out.get(key, 0) is None:
                out.pop(key)
        if out.get("cold") is False:
            out.pop("cold")
        return out


def build_grid(entry: BaseEntry) -> list[dict[str, Any]]:
    """Every build config of an entry (cartesian product of list-valued fields)."""
    return expand(entry.build)


def search_grid(entry: BaseEntry) -> list[dict[str, Any]]:
    return expand(entry.search)


def checked_entries(spec: SweepSpec) -> list[CheckedEntry]:
    """Every entry validated (once: the result is kept on the entry) for the spec's ``k``."""
    return [
        check_entry(e, spec.k, where=spec.source, field=f"indexes[{i}]", grids=True)
        for i, e in enumerate(spec.indexes)
    ]


def validate_spec(spec: SweepSpec) -> SweepSpec:
    """Validate every entry's params against its backend's models and cross-field rules; the
    strategy resolved (:func:`resolve_strategy`)."""
    checked_entries(spec)
    if spec.workload is not None:  # a name no registered kind answers to: one line, here
        from retrieval.tune.workloads import workload_of

        workload_of(spec)
    if spec.target is not None and spec.target_recall is None:
        spec = spec.model_copy(update={"target_recall": DEFAULT_QUALITY_RECALL})
    return resolve_strategy(spec)


def resolve_strategy(spec: SweepSpec) -> SweepSpec:
    """The ONE place that picks the default strategy: ``target`` when the spec (or an override)
    sets ``target_recall`` and ``tune.strategy`` was not set explicitly (pydantic's
    ``model_fields_set``), else the spec as is (``grid`` without a target). Every door (spec file,
    mapping, spec object, ``--target-recall``) goes through :func:`validate_spec`, so the API and
    the CLI agree."""
    if spec.target_recall is None or "strategy" in spec.tune.model_fields_set:
        return spec
    tune = spec.tune.model_copy(update={"strategy": "target"})
    tune.__pydantic_fields_set__.discard("strategy")  # still the default: a later override wins
    return spec.model_copy(update={"tune": tune})


def parse_spec(data: Mapping[str, Any] | Any, source: str = "<memory>") -> SweepSpec:
    return load_model(data, SweepSpec, source=source, extra={"source": source},
                      check=validate_spec)


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a spec file; errors name the file."""
    return load_model(path, SweepSpec, extra={"source": str(path)}, check=validate_spec)


def resolved(spec: SweepSpec) -> dict[str, Any]:
    """The spec as plain data (what goes into the run directory)."""
    return spec.model_dump(mode="json")


__all__ = [
    "QUALITY_KEYS",
    "GridValue",
    "IndexBuildSpec",
    "IndexEntry",
    "Params",
    "QualityTarget",
    "Scalar",
    "SweepSpec",
    "build_grid",
    "checked_entries",
    "load_spec",
    "parse_spec",
    "resolved",
    "search_grid",
    "validate_spec",
]
