"""The semantic-cache threshold tuning spec (``sweeps/qqp-cache.yaml``): YAML -> pydantic.

Every model forbids unknown keys; errors name the file, the field, the allowed values and the
value received. Units: thresholds are cosine distances (0..2) unless a ``unit`` says otherwise;
prices in USD; latency in ms; times in s. Endpoints (REDIS_URL) never come from the spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from retrieval.cache.redis import IndexParams
from retrieval.cache.thresholds import ThresholdSpec
from retrieval.params import Params, RunName
from retrieval.specfile import load_model


class PairsSpec(Params):
    """Which labelled pairs take part: ``limit`` pairs drawn with ``seed`` (None: all 80,854)."""

    limit: int | None = Field(None, ge=10)
    seed: int = 0


class SplitSpec(Params):
    """Tuning vs held-out probes, split by connected component of the pair graph (no question
    is on both sides)."""

    heldout_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    seed: int = 0


class EmbedderSpec(Params):
    model: str | None = Field(None, description="None: the packaged all-MiniLM-L6-v2")
    batch_size: int = Field(64, ge=1, le=4096)


class CacheIndexSpec(Params):
    name: str = Field("rwb-qqp-tune", min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    index: IndexParams = IndexParams()
    load_batch: int = Field(1000, ge=1, le=100_000)
    knn_batch: int = Field(256, ge=1, le=100_000)


class TuningSpec(Params):
    """Pick the largest threshold whose one-sided upper ``confidence`` bound on the tuning
    false-hit rate (false hits / probes) is <= ``max_false_hit``."""

    max_false_hit: float = Field(0.05, gt=0.0, lt=1.0)
    confidence: float = Field(0.95, ge=0.5, lt=1.0)
    bound: Literal["wilson", "clopper_pearson"] = "wilson"
    grid_step: float = Field(1e-4, gt=0.0, le=0.1, description="cosine distance")
    max_threshold: float = Field(1.0, gt=0.0, le=2.0, description="cosine distance")
    curve_step: float = Field(0.01, gt=0.0, le=0.5, description="reported curve, distance")

    @model_validator(mode="after")
    def _steps(self) -> TuningSpec:
        if self.curve_step < self.grid_step:
            raise ValueError(
                f"curve_step ({self.curve_step}) must be >= grid_step ({self.grid_step})"
            )
        return self


class LatencySpec(Params):
    """Single-query lookup latency against the live Redis after loading ``sizes`` entries."""

    sizes: list[int] = Field(default_factory=lambda: [10_000, 100_000])
    queries: int = Field(1000, ge=10, le=100_000)
    warmup: int = Field(100, ge=0, le=10_000)
    threshold: ThresholdSpec = ThresholdSpec(value=0.2)

    @model_validator(mode="after")
    def _sizes(self) -> LatencySpec:
        if any(s < 1 for s in self.sizes) or sorted(set(self.sizes)) != list(self.sizes):
            raise ValueError(f"sizes must be increasing positive integers; got {self.sizes}")
        return self


class CostSpec(Params):
    """LLM price; one avoided LLM call saves ``usd_per_call``."""

    usd_per_million_input_tokens: float = Field(2.5, ge=0.0)
    usd_per_million_output_tokens: float = Field(10.0, ge=0.0)
    input_tokens_per_query: float = Field(150.0, ge=0.0)
    output_tokens_per_query: float = Field(350.0, ge=0.0)
    usd_per_1k_lookups: float = Field(0.0, ge=0.0, description="embedding + cache cost")

    @property
    def usd_per_call(self) -> float:
        return (self.usd_per_million_input_tokens * self.input_tokens_per_query
                + self.usd_per_million_output_tokens * self.output_tokens_per_query) / 1e6


class ExportSpec(Params):
    """What the exported redisvl SemanticCache config is called and how long entries live."""

    name: str = Field("llmcache", min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    ttl_s: int | None = Field(None, ge=1)


class CacheTuneSpec(Params):
    """A semantic-cache threshold tuning experiment on GPTCache's Quora question pairs."""

    name: RunName = "qqp-cache"
    dataset: Literal["gptcache_qqp"] = "gptcache_qqp"
    pairs: PairsSpec = PairsSpec()
    distractors: int = Field(0, ge=0, description="extra stored questions from other pairs")
    probe_side: Literal["text_a", "text_b"] = "text_b"
    split: SplitSpec = SplitSpec()
    embedder: EmbedderSpec = EmbedderSpec()
    cache: CacheIndexSpec = CacheIndexSpec()
    tuning: TuningSpec = TuningSpec()
    latency: LatencySpec = LatencySpec()
    cost: CostSpec = CostSpec()
    export: ExportSpec = ExportSpec()
    source: str = Field("<memory>", exclude=True)


def parse_cache_spec(data: Mapping[str, Any] | Any, source: str = "<memory>") -> CacheTuneSpec:
    return load_model(data, CacheTuneSpec, source=source, extra={"source": source})


def load_cache_spec(path: str | Path) -> CacheTuneSpec:
    """Read and validate a cache tuning spec; errors name the file."""
    return load_model(path, CacheTuneSpec, extra={"source": str(path)})


__all__ = [
    "CacheIndexSpec",
    "CacheTuneSpec",
    "CostSpec",
    "EmbedderSpec",
    "ExportSpec",
    "LatencySpec",
    "PairsSpec",
    "SplitSpec",
    "TuningSpec",
    "load_cache_spec",
    "parse_cache_spec",
]
