"""The pipeline spec of ``rwb profile`` (YAML, ``extra="forbid"``): the user's retrieval path as
stages - query embedding, semantic-cache lookup, retrieval over collections (serial or parallel,
per-call timeout), fusion, rerank, BM25 fallback - plus the queries, an optional open-loop load
and the remedies to try. See ``sweeps/pipeline-example.yaml``.

Collections are the fan-out bench's (:class:`~retrieval.bench.fanout.spec.FanoutCollection`:
backend + build + search); ``export: FILE`` instead takes an index config that ``rwb export``
wrote (read back through the engine's inverse, see :mod:`retrieval.exporting.inverse`).
Times are milliseconds unless a field says seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from retrieval.bench.fanout.spec import FanoutCollection, FanoutQueries
from retrieval.fusion import DEFAULT_RRF_K
from retrieval.params import Params, RunName, Seed
from retrieval.specfile import load_model

#: the pipeline's stages, in request order (names of the stage spans and of the JSON ``stages``)
STAGES: tuple[str, ...] = ("embed", "cache", "retrieve", "fuse", "rerank", "bm25", "cache_store")


class ProfileCollection(FanoutCollection):
    """One collection (the fan-out's entry); ``export`` names an ``rwb export`` file whose engine
    config replaces ``backend`` / ``build`` / ``search``."""

    export: str | None = Field(None, description="an index config written by `rwb export`")


class EmbedStage(Params):
    """Query embedding: one ``embed([query])`` call per request (uncached, as in serving)."""

    model: str | None = Field(None, description="local model folder (None: packaged MiniLM)")
    runtime: str = Field("torch", description="torch | torch-bf16 | onnx | onnx-int8 | openvino")


class CacheStage(Params):
    """A semantic cache (Redis, :class:`retrieval.cache.live.SemanticCache`) in front of the
    retrieval: a hit within ``threshold`` (cosine distance) answers with the cached final list;
    a miss is stored after the request. ``redis_url`` None: ``$REDIS_URL``."""

    threshold: float = Field(0.1, ge=0.0, le=2.0, description="cosine distance")
    redis_url: str | None = None


class RetrievalStage(Params):
    mode: Literal["serial", "threads"] = Field(
        "serial", description="collections one after another, or in parallel (thread pool)")
    timeout_s: float = Field(5.0, gt=0.0, description="default per-collection deadline, s")
    collections: list[ProfileCollection] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> RetrievalStage:
        names = [c.name for c in self.collections]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"collection names must be unique; repeated: {', '.join(dup)}")
        return self


class FusionStage(Params):
    method: Literal["rrf", "score"] = "rrf"
    rrf_k: float = Field(DEFAULT_RRF_K, ge=0.0)


class RerankStage(Params):
    """Cross-encoder rerank of the fused top-``depth``. ``model``: a local cross-encoder folder,
    or ``tiny`` (rwb's random-weight tiny cross-encoder: latency plumbing only)."""

    model: str = "tiny"
    depth: int = Field(30, ge=1, le=1000)
    batch_size: int = Field(32, ge=1)


class Bm25Fallback(Params):
    """Answer with BM25 over ``collection``'s texts when the dense path returns fewer than
    ``min_results`` results (collections failed or missed their deadline)."""

    collection: str
    min_results: int = Field(1, ge=1)


class LoadSpec(Params):
    """Open-loop rates (queries/s) run after the one-at-a-time pass; percentiles corrected for
    coordinated omission (the load bench's HDR histograms)."""

    rates: list[float] = Field(default_factory=list)
    duration_s: float = Field(3.0, gt=0.0)
    workers: int = Field(4, ge=1, le=64)
    arrival: Literal["fixed", "poisson"] = "poisson"

    @model_validator(mode="after")
    def _bounded(self) -> LoadSpec:
        """Finite, bounded duration and rates (the load bench's limits): ``rates: [1e12]``
        would schedule terabytes of arrivals; NaN / inf / 0 / negative mean nothing."""
        from retrieval.bench.load.spec import MAX_DURATION_S, MAX_QPS, MAX_SCHEDULED

        if not 0 < self.duration_s <= MAX_DURATION_S:  # nan and inf fail too
            raise ValueError(f"load.duration_s must be a number of seconds > 0 and <= "
                             f"{MAX_DURATION_S:g}; received {self.duration_s!r}")
        most = min(MAX_QPS, MAX_SCHEDULED / self.duration_s)
        for i, r in enumerate(self.rates):
            if not 0 < r <= most:
                raise ValueError(f"load.rates[{i}] must be a rate in queries/s > 0 and <= "
                                 f"{most:,.0f}; received {r!r}")
        return self


class KnobRemedy(Params):
    """The tuned search knobs of one collection: ``search`` params, or the search part of an
    ``rwb export`` file (``export``)."""

    search: dict[str, Any] | None = None
    export: str | None = None


class Remedies(Params):
    """The remedies ``--remedies`` tries, in this order, cumulatively (each measured):
    parallel collections, tuned knobs, batched query embedding, a smaller rerank depth, the
    cache at its tuned threshold, the BM25 fallback with a tighter per-collection deadline. A
    step left out is skipped."""

    parallel: bool = True
    knobs: dict[str, KnobRemedy] = Field(default_factory=dict)
    embed_batch: int | None = Field(
        None, ge=2, le=1024, description="queries embedded together in one call (requests "
        "arriving together, micro-batched); each request pays its batch's embedding")
    rerank_depth: int | None = Field(None, ge=1)
    cache_threshold: float | None = Field(None, ge=0.0, le=2.0)
    bm25_fallback: Bm25Fallback | None = None
    fallback_timeout_s: float | None = Field(None, gt=0.0, description="per-collection deadline "
                                             "with the fallback, s")


class ProfileSpec(Params):
    """A retrieval pipeline to profile. ``k``: results of the final list."""

    name: RunName = "pipeline"
    k: int = Field(10, ge=1, le=1000)
    seed: Seed = 0
    threads: int = Field(1, ge=1, le=512, description="threads inside each index")
    warmup: int = Field(5, ge=0, description="untimed requests before each measured pass")
    queries: FanoutQueries = Field(default_factory=FanoutQueries)
    embed: EmbedStage = Field(default_factory=EmbedStage)
    cache: CacheStage | None = None
    retrieval: RetrievalStage
    fusion: FusionStage = Field(default_factory=FusionStage)
    rerank: RerankStage | None = None
    bm25: Bm25Fallback | None = None
    load: LoadSpec | None = None
    remedies: Remedies = Field(default_factory=Remedies)
    #: production span name -> stage, for ``--compare`` (spans named like rwb's need none)
    span_names: dict[str, str] = Field(default_factory=dict)
    source: str = Field("<memory>", exclude=True)

    @model_validator(mode="after")
    def _refs(self) -> ProfileSpec:
        names = {c.name for c in self.retrieval.collections}
        for field, fb in (("bm25", self.bm25), ("remedies.bm25_fallback",
                                                self.remedies.bm25_fallback)):
            if fb is not None and fb.collection not in names:
                raise ValueError(f"{field}.collection must name a collection "
                                 f"({', '.join(sorted(names))}); received {fb.collection!r}")
        bad = sorted(set(self.remedies.knobs) - names)
        if bad:
            raise ValueError(f"remedies.knobs names unknown collections {bad}; collections: "
                             f"{', '.join(sorted(names))}")
        stages = set(STAGES) | {f"retrieve/{n}" for n in names}
        odd = sorted(v for v in self.span_names.values() if v not in stages)
        if odd:
            raise ValueError(f"span_names maps to unknown stages {odd}; stages: "
                             f"{', '.join(sorted(stages))}")
        return self

    def resolve(self, path: str) -> Path:
        """A path of the spec (an export file) relative to the spec's folder."""
        p = Path(path)
        if p.is_absolute() or self.source.startswith("<"):
            return p
        return Path(self.source).parent / p


def parse_profile_spec(data: Any, source: str = "<memory>") -> ProfileSpec:
    return load_model(data, ProfileSpec, source=source, what="a pipeline spec",
                      extra={"source": source})


def load_profile_spec(path: str | Path) -> ProfileSpec:
    """Read and validate a pipeline spec; errors name the file and the field."""
    p = Path(path)
    return load_model(p, ProfileSpec, what="a pipeline spec", extra={"source": str(p)})


__all__ = [
    "STAGES",
    "Bm25Fallback",
    "CacheStage",
    "EmbedStage",
    "FusionStage",
    "KnobRemedy",
    "LoadSpec",
    "ProfileCollection",
    "ProfileSpec",
    "Remedies",
    "RerankStage",
    "RetrievalStage",
    "load_profile_spec",
    "parse_profile_spec",
]
