"""The cross-layer study spec (``sweeps/rag-end-to-end.yaml``, ``kind: rag-study``).

YAML -> pydantic (``extra="forbid"``). Units: latency in ms, money in USD, thresholds in cosine
distance (0..2, lower is stricter), quality metrics 0..1. Errors name the file, the field, what
is allowed and the value received.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from retrieval.cache.spec import CacheTuneSpec, check_cache_spec
from retrieval.errors import ConfigError, param_error
from retrieval.indexes.engine import backend_for
from retrieval.indexes.entry import CheckedEntry, IndexEntry, check_entry
from retrieval.indexes.registry import get_backend
from retrieval.params import Params, RunName
from retrieval.rerank.dataset import check_dataset
from retrieval.rerank.spec import EmbedderSpec, RerankerSpec
from retrieval.specfile import load_model, read_yaml

KIND = "rag-study"
STAT_TESTS = ("fisher", "student", "wilcoxon")


class IndexKnobSpec(IndexEntry):
    """The first-stage index and the one search knob the study tunes (any adapter); ``search``:
    the other search params, fixed."""

    backend: str = Field(default_factory=lambda: backend_for("ivf"))
    metric: Literal["cosine", "ip", "l2"] = "cosine"
    knob: str = "nprobe"
    values: list[int] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _values(cls, v: list[int]) -> list[int]:
        if any(x < 1 for x in v) or len(set(v)) != len(v):
            raise ValueError("must be distinct integers >= 1")
        return sorted(v)


class RetrievalSpec(Params):
    """The retrieval path: a text collection's judged queries through the embedder and the
    index. ``collection`` takes the rerank spec's dataset forms (``scifact``, ``cranfield``, a
    text manifest name, ``beir:<folder>``; see :mod:`retrieval.rerank.dataset`)."""

    collection: str = Field("scifact", min_length=1)
    split: str = Field("test", min_length=1)
    max_queries: int | None = Field(None, ge=4, description="seeded subset (quick runs)")
    tuning_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    k: int = Field(10, ge=1, le=100, description="nDCG@k and recall@k of the final list")
    embedder: EmbedderSpec = EmbedderSpec()
    index: IndexKnobSpec


class RerankLegSpec(Params):
    """Rerank depths (0 = no rerank); scored once at the largest depth, prefixes evaluated."""

    reranker: RerankerSpec = RerankerSpec()
    depths: list[int] = Field(min_length=1)

    @field_validator("depths")
    @classmethod
    def _depths(cls, v: list[int]) -> list[int]:
        if any(d < 0 or d > 1000 for d in v) or len(set(v)) != len(v):
            raise ValueError("must be distinct integers in [0, 1000]")
        return sorted(v)


class LatencyPlan(Params):
    """What is timed (single query, ms): the index search for every query at every (knob value,
    fetch size) after ``search_warmup`` untimed calls; the query embedding and the rerank call at
    every depth for ``sample_queries`` seeded queries (the model's cost barely depends on the
    query, and each call costs up to a second on 2 cores), after ``warmup`` untimed calls,
    median of ``repeats``."""

    sample_queries: int = Field(16, ge=1, le=10_000)
    warmup: int = Field(1, ge=0, le=100)
    repeats: int = Field(1, ge=1, le=20)
    search_warmup: int = Field(10, ge=0, le=10_000)
    #: torch intra-op threads while the model calls are timed (None: torch's default)
    torch_threads: int | None = Field(None, ge=1, le=512)


class CostModel(Params):
    """Cost per query = (miss) one LLM call (the cache spec's token prices) + the retrieval
    host's time: the host is billed ``usd_per_host_hour`` and serves one query at a time, so a
    query costs its end-to-end wall time at that rate; plus ``cache.cost.usd_per_1k_lookups``."""

    usd_per_host_hour: float = Field(0.10, ge=0.0)


class ConstraintsSpec(Params):
    """``target_recall``: the final top-k must keep this share of the exact dense top-k (recall@k
    by id against exact search with the same embeddings; a bootstrap lower bound at
    ``confidence`` over the tuning queries must meet it). The false-hit cap is the cache spec's
    ``tuning.max_false_hit`` (upper bound at its confidence)."""

    target_recall: float = Field(0.9, gt=0.0, le=1.0)
    confidence: float = Field(0.95, ge=0.5, lt=1.0)
    resamples: int = Field(1000, ge=100, le=100_000)


class OptunaSpec(Params):
    sampler: Literal["nsga2", "tpe", "random"] = "nsga2"
    n_trials: int = Field(80, ge=1, le=100_000)
    population_size: int = Field(20, ge=2, le=10_000)
    threshold_step: float = Field(0.01, gt=0.0, le=0.5, description="cosine distance")


class DefaultSpec(Params):
    """The untuned configuration the chosen one is tested against (folklore defaults)."""

    knob: int
    depth: int
    threshold: float = Field(ge=0.0, le=2.0, description="cosine distance")


class ChoiceSpec(Params):
    """From the feasible Pareto set: the lowest cost (then p95) among points whose tuning
    end-to-end nDCG@k is within ``tolerance`` (absolute) of the best one."""

    tolerance: float = Field(0.01, ge=0.0, le=1.0)


class SignificanceSpec(Params):
    test: Literal["fisher", "student", "wilcoxon"] = "fisher"
    n_permutations: int = Field(2000, ge=100, le=1_000_000)
    alpha: float = Field(0.05, gt=0.0, lt=1.0)


class StudySpec(Params):
    """One study across layers: index knob x rerank depth x cache threshold."""

    kind: Literal["rag-study"]
    name: RunName = "rag-end-to-end"
    seed: int = 0
    retrieval: RetrievalSpec
    rerank: RerankLegSpec
    latency: LatencyPlan = LatencyPlan()
    cache: CacheTuneSpec = CacheTuneSpec()
    cost: CostModel = CostModel()
    constraints: ConstraintsSpec = ConstraintsSpec()
    optuna: OptunaSpec = OptunaSpec()
    default: DefaultSpec
    choice: ChoiceSpec = ChoiceSpec()
    significance: SignificanceSpec = SignificanceSpec()
    source: str = Field("<memory>", exclude=True)

    @model_validator(mode="after")
    def _defaults_in_grid(self) -> StudySpec:
        idx = self.retrieval.index
        if self.default.knob not in idx.values:
            raise ValueError(f"default.knob must be one of retrieval.index.values {idx.values}; "
                             f"received {self.default.knob}")
        if self.default.depth not in self.rerank.depths:
            raise ValueError(f"default.depth must be one of rerank.depths "
                             f"{self.rerank.depths}; received {self.default.depth}")
        top = self.cache.tuning.max_threshold
        if self.default.threshold > top:
            raise ValueError(f"default.threshold must be <= cache.tuning.max_threshold ({top}); "
                             f"received {self.default.threshold}")
        return self

    @property
    def thresholds(self) -> list[float]:
        """The threshold grid Optuna picks from (cosine distance), including the default."""
        step = self.optuna.threshold_step
        top = self.cache.tuning.max_threshold
        grid = {round(i * step, 10) for i in range(round(top / step) + 1)}
        grid.add(round(self.default.threshold, 10))
        return sorted(grid)

    @property
    def fetch_sizes(self) -> list[int]:
        """Candidates fetched per query for each depth: max(depth, k)."""
        return sorted({max(d, self.retrieval.k) for d in self.rerank.depths})


def study_index(spec: StudySpec) -> CheckedEntry:
    """The study's index validated (once; the result is kept on the entry): its build, and one
    search config per knob value (the fixed ``search`` plus the knob), each checked for the
    largest fetch size."""
    idx = spec.retrieval.index
    return check_entry(
        idx, max(spec.fetch_sizes), where=spec.source, field="retrieval.index",
        searches=[{**idx.search, idx.knob: v} for v in idx.values],
        search_prefix="retrieval.index.", context="retrieval.index.values",
    )


def check_study_spec(spec: StudySpec) -> StudySpec:
    """Cross-model checks: the collection; the cache spec's files (relative paths resolved
    against the study spec's folder); the knob is a search param of the backend; the index."""
    collection = check_dataset(spec.retrieval.collection, spec.retrieval.split, spec.source,
                               field="retrieval.collection")
    cache = check_cache_spec(spec.cache, spec.source)
    if collection != spec.retrieval.collection or cache is not spec.cache:
        spec = spec.model_copy(update={
            "retrieval": spec.retrieval.model_copy(update={"collection": collection}),
            "cache": cache})
    idx = spec.retrieval.index
    cls = get_backend(idx.backend, where=f"{spec.source}: field 'retrieval.index.backend'")
    known = set(cls.SearchParams.model_fields)
    if idx.knob not in known:
        raise param_error("retrieval.index.knob", f"one of {', '.join(sorted(known))}",
                          idx.knob, where=spec.source)
    study_index(spec)
    return spec


def parse_study_spec(data: Mapping[str, Any] | Any, source: str = "<memory>") -> StudySpec:
    return load_model(data, StudySpec, source=source, extra={"source": source},
                      check=check_study_spec)


def load_study_spec(path: str | Path) -> StudySpec:
    return load_model(path, StudySpec, extra={"source": str(path)}, check=check_study_spec)


def is_study_spec(path: str | Path) -> bool:
    """True when ``path`` is a YAML mapping with ``kind: rag-study`` (what ``rwb sweep``
    dispatches on); False for anything else, including unreadable files (the index-sweep
    loader then reports the problem)."""
    try:
        data = read_yaml(path)
    except ConfigError:
        return False
    return isinstance(data, dict) and data.get("kind") == KIND


__all__ = [
    "KIND",
    "STAT_TESTS",
    "StudySpec",
    "check_study_spec",
    "is_study_spec",
    "load_study_spec",
    "parse_study_spec",
    "study_index",
]
