"""The rerank-depth sweep spec (``sweeps/scifact-rerank.yaml``): YAML -> pydantic, extra="forbid".

Units: quality metrics are 0..1 means over queries and ``tolerance`` is an absolute difference
in the selection metric; latency is milliseconds; router thresholds are dense similarities (cosine
similarity -1..1 for ``dense.metric: cosine``). Errors name the file, the field, what is allowed
and the value received.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.engine import backend_for
from retrieval.indexes.entry import CheckedEntry, IndexEntry, check_entry
from retrieval.params import Params, RunName, Seed
from retrieval.paths import resolve_spec_path as resolve_path
from retrieval.rerank.bm25 import BM25Params
from retrieval.rerank.dataset import check_dataset
from retrieval.specfile import load_model
from retrieval.stats.noninferiority import QualityTarget

DATASETS = ("scifact", "cranfield")
QUALITY_METRICS = ("ndcg@10", "mrr@10")


class EmbedderSpec(Params):
    """``model``: None (the packaged all-MiniLM-L6-v2) or a local sentence-transformers folder."""

    model: str | None = None
    batch_size: int = Field(32, ge=1, le=4096)


class DenseSpec(IndexEntry):
    """The dense first stage: any index backend; build/search params are the backend's own
    (checked together for the ``fetch_k`` candidates it is searched for)."""

    backend: str = Field(default_factory=lambda: backend_for("exact"))
    metric: Literal["cosine", "ip", "l2"] = "cosine"


class RerankerSpec(Params):
    """``bi-encoder``: the embedder (or ``model``) re-scores by cosine at query time;
    ``cross-encoder`` / ``flag``: a local model folder (or offline-cached name) is required;
    ``callable``: ``callable: module:function`` taking (query, passages) -> scores (or the
    callable given to ``retrieval.tune_rerank(reranker=...)``); ``http``: a Cohere / Jina / TEI
    ``rerank`` endpoint at ``url`` (``shape``, optional ``model``, the key in the environment
    variable ``key_env``, ``timeout_s`` seconds per request, ``retries``, ``concurrency``
    requests in flight, ``max_documents`` per request); ``entry-point``: the ``rwb.rerankers``
    entry point ``name`` called with ``options`` (:mod:`retrieval.rerank.custom`)."""

    kind: Literal["bi-encoder", "cross-encoder", "flag", "callable", "http",
                  "entry-point"] = "bi-encoder"
    model: str | None = None
    batch_size: int = Field(32, ge=1, le=4096)
    max_length: int | None = Field(None, ge=8, le=8192)
    callable: str | None = None
    url: str | None = None
    shape: Literal["cohere", "jina", "tei"] = "cohere"
    key_env: str | None = None
    timeout_s: float = Field(30.0, gt=0.0, le=3600.0)
    retries: int = Field(3, ge=0, le=20)
    concurrency: int = Field(4, ge=1, le=256)
    max_documents: int = Field(100, ge=1, le=10_000)
    name: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _model_needed(self) -> RerankerSpec:
        if self.kind in ("cross-encoder", "flag") and not self.model:
            raise ValueError(f"a {self.kind} reranker needs 'model' (a local folder)")
        if self.kind == "http" and not self.url:
            raise ValueError("an http reranker needs 'url' (the endpoint's rerank URL)")
        if self.kind == "entry-point" and not self.name:
            raise ValueError("an entry-point reranker needs 'name' (its rwb.rerankers entry)")
        return self

    @property
    def is_custom(self) -> bool:
        """Callable, HTTP endpoint or entry point (:mod:`retrieval.rerank.custom`)."""
        return self.kind in ("callable", "http", "entry-point")


class LatencySpec(Params):
    """Actual rerank calls at every depth on ``sample_queries`` seeded queries (``warmup``
    untimed calls first; the median of ``repeats`` calls per query and depth)."""

    sample_queries: int = Field(20, ge=1, le=100_000)
    warmup: int = Field(1, ge=0, le=100)
    repeats: int = Field(1, ge=1, le=20)


class RouterSpec(Params):
    """BM25 fallback: route when the dense top-1 similarity < threshold. ``thresholds``: explicit
    grid (similarity units), else ``quantiles`` + 1 quantiles of the tuning split's top-1 values
    (plus never/always). ``rerank_depth``: depth on the primary (dense) path; None = the chosen
    depth."""

    enabled: bool = True
    thresholds: list[float] | None = None
    quantiles: int = Field(20, ge=1, le=1000)
    rerank_depth: int | None = Field(None, ge=0)
    tolerance: float = Field(0.005, ge=0.0, le=1.0)


class RunFileStage(Params):
    """The user's own first stage: a TREC run file (``qid Q0 docid rank score tag``) produced by
    their production retriever; rwb reranks each query's top ``max(depths)`` of it. A relative
    path resolves against the working directory (as in every spec)."""

    run: str = Field(min_length=1)


class RerankSweepSpec(Params):
    """One rerank-depth experiment on one collection (``dataset``: see
    :mod:`retrieval.rerank.dataset`)."""

    name: RunName = "rerank"
    dataset: str = Field(min_length=1)
    split: str = Field("test", min_length=1)
    max_queries: int | None = Field(None, ge=2, description="seeded subset, for quick runs")
    seed: Seed = 0
    tuning_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    embedder: EmbedderSpec = EmbedderSpec()
    dense: DenseSpec = DenseSpec()
    bm25: BM25Params = BM25Params()
    first_stage: Literal["bm25", "dense"] | RunFileStage = "bm25"
    reranker: RerankerSpec = RerankerSpec()
    depths: list[int] = Field(default_factory=lambda: [0, 5, 10, 20, 30, 50, 100], min_length=1)
    metric: Literal["ndcg@10", "mrr@10"] = "ndcg@10"
    recall_k: int = Field(100, ge=1, le=1000)
    tolerance: float = Field(0.005, ge=0.0, le=1.0)
    latency: LatencySpec = LatencySpec()
    router: RouterSpec = RouterSpec()
    #: ``{ndcg_non_inferior: M}`` (or ``mrr_non_inferior`` / ``recall@100_non_inferior``): the
    #: cheapest (ANN knob, rerank depth) pair non-inferior to exact search reranked at the
    #: largest depth (:mod:`retrieval.rerank.quality`); needs ``first_stage: dense`` on an ANN
    #: backend
    target: QualityTarget | None = None
    #: ``[low, high]`` of the dense backend's knob searched for ``target`` (default: its range)
    knob_range: tuple[int, int] | None = None

    @field_validator("first_stage", mode="before")
    @classmethod
    def _first_stage(cls, v: Any) -> Any:
        allowed = "'bm25', 'dense' or {run: FILE} (a TREC run file)"
        if isinstance(v, RunFileStage) or v in ("bm25", "dense"):
            return v
        if isinstance(v, Mapping):
            if set(v) != {"run"} or not isinstance(v["run"], str) or not v["run"].strip():
                raise ValueError(f"must be {allowed}")
            return RunFileStage(run=v["run"])
        raise ValueError(f"must be {allowed}")

    @field_validator("depths")
    @classmethod
    def _depths(cls, v: list[int]) -> list[int]:
        if any(d < 0 or d > 1000 for d in v):
            raise ValueError("each depth must be in [0, 1000]")
        if len(set(v)) != len(v):
            raise ValueError("depths must be distinct")
        return v

    @property
    def first_stage_name(self) -> str:
        """``bm25``, ``dense`` or ``run`` (a TREC run file)."""
        return self.first_stage if isinstance(self.first_stage, str) else "run"

    @property
    def max_depth(self) -> int:
        return max(self.depths)

    @property
    def fetch_k(self) -> int:
        """Candidates fetched from each first stage (covers the largest depth and recall@k)."""
        return max(self.max_depth, self.recall_k)

    @property
    def metrics(self) -> tuple[str, ...]:
        return ("ndcg@10", f"recall@{self.recall_k}", "mrr@10")


def dense_index(spec: RerankSweepSpec, source: str = "<memory>") -> CheckedEntry:
    """The dense first stage validated (once; the result is kept on the entry) for the
    ``fetch_k`` candidates it is searched for."""
    return check_entry(spec.dense, spec.fetch_k, where=source, field="dense")


def _check(spec: RerankSweepSpec, source: str) -> RerankSweepSpec:
    dataset = check_dataset(spec.dataset, spec.split, source)
    update: dict[str, Any] = {}
    if dataset != spec.dataset:
        update["dataset"] = dataset
    if isinstance(spec.first_stage, RunFileStage):
        run = resolve_path(spec.first_stage.run, source)
        if run != spec.first_stage.run:
            update["first_stage"] = RunFileStage(run=run)
    if update:
        spec = spec.model_copy(update=update)
    rd = spec.router.rerank_depth
    if spec.router.enabled and rd is not None and rd not in spec.depths:
        raise param_error("router.rerank_depth", f"one of depths {spec.depths}", rd, where=source)
    dense_index(spec, source)
    if spec.target is not None:
        _check_target(spec, source)
    return spec


def _check_target(spec: RerankSweepSpec, source: str) -> None:
    """One line (exit 2) for what a quality target cannot work with."""
    assert spec.target is not None
    if spec.first_stage_name != "dense":
        raise ConfigError(f"{source}: field 'target' ({spec.target.key}) tunes the dense ANN "
                          f"knob with the rerank depth: first_stage must be dense; received "
                          f"{spec.first_stage_name}")
    need = max(spec.target.depth, 10)
    if spec.fetch_k < need:
        raise ConfigError(f"{source}: field 'recall_k' (or the largest depth) must be >= {need} "
                          f"with target {spec.target.key}; received {spec.fetch_k}")
    ann_knob(spec, source)


def ann_knob(spec: RerankSweepSpec, where: str = "spec") -> tuple[str, int, int]:
    """The dense backend's monotone knob and its range: ``knob_range`` when the spec gives it
    (checked against the backend's), else the backend's range capped at its most accurate
    setting. ConfigError (one line) when the dense backend has no monotone knob."""
    checked = dense_index(spec, where)
    cls = checked.cls
    build = checked.build(spec.dense.build)
    k = spec.fetch_k
    for knob in cls.monotone_knobs_for(build):
        low, high = cls.knob_range(knob, build, k)
        if low >= high:
            continue
        most = cls.most_accurate_search(build).get(knob)
        if isinstance(most, int) and low <= most < high:
            high = most
        if spec.knob_range is not None:
            a, b = spec.knob_range
            if a < low or b > high or a > b:
                raise ConfigError(f"{where}: field 'knob_range' ({knob} of backend "
                                  f"'{cls.name}') must lie within [{low}, {high}]; received "
                                  f"[{a}, {b}]")
            low, high = a, b
        return knob, low, high
    raise ConfigError(f"{where}: field 'target' needs an ANN dense first stage (a backend with "
                      f"a monotone search knob, e.g. hnswlib or faiss-hnsw); received "
                      f"dense.backend {spec.dense.backend!r}")


def parse_rerank_spec(data: Mapping[str, Any] | Any, source: str = "<memory>") -> RerankSweepSpec:
    return load_model(data, RerankSweepSpec, source=source,
                      check=lambda spec: _check(spec, source))


def load_rerank_spec(path: str | Path) -> RerankSweepSpec:
    """Read and validate a spec file; errors name the file."""
    return load_model(path, RerankSweepSpec, check=lambda spec: _check(spec, str(path)))


__all__ = [
    "DATASETS",
    "DenseSpec",
    "EmbedderSpec",
    "LatencySpec",
    "RerankSweepSpec",
    "RerankerSpec",
    "RouterSpec",
    "RunFileStage",
    "ann_knob",
    "dense_index",
    "load_rerank_spec",
    "parse_rerank_spec",
]
