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

from retrieval.adaptive.spec import CacheAdaptiveSpec
from retrieval.cache.redis import IndexParams
from retrieval.cache.thresholds import ThresholdSpec
from retrieval.params import Params, RunName, Seed
from retrieval.specfile import load_model


class PairsSource(Params):
    """A file of labelled pairs: ``format`` jsonl | csv | tsv (None: from the suffix), the
    columns holding the two texts and the label (0/1 or true/false). A relative ``path``
    resolves against the working directory (as in every spec)."""

    path: str = Field(min_length=1)
    format: Literal["jsonl", "csv", "tsv"] | None = None
    text_a: str = Field("a", min_length=1)
    text_b: str = Field("b", min_length=1)
    label: str = Field("duplicate", min_length=1)


class PairsSpec(Params):
    """Which labelled pairs take part: GPTCache's QQP (no ``path``) or the user's file
    (``path``, ``format``, columns as in :class:`PairsSource`); ``limit`` pairs drawn with
    ``seed`` (None: all of them)."""

    path: str | None = Field(None, min_length=1)
    format: Literal["jsonl", "csv", "tsv"] | None = None
    text_a: str = Field("a", min_length=1)
    text_b: str = Field("b", min_length=1)
    label: str = Field("duplicate", min_length=1)
    limit: int | None = Field(None, ge=10)
    seed: Seed = 0

    def source(self) -> PairsSource | None:
        if self.path is None:
            return None
        return PairsSource(path=self.path, format=self.format, text_a=self.text_a,
                           text_b=self.text_b, label=self.label)


class TextsSource(Params):
    """Distractor texts from a file: ``txt`` (one per line) or a ``column`` of jsonl/csv/tsv
    (``format`` None: from the suffix). Every text is stored in the cache, never probed."""

    path: str = Field(min_length=1)
    format: Literal["txt", "jsonl", "csv", "tsv"] | None = None
    column: str = Field("text", min_length=1)


class SplitSpec(Params):
    """Tuning vs held-out probes, split by connected component of the pair graph (no question
    is on both sides)."""

    heldout_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    seed: Seed = 0


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
    """A semantic-cache threshold tuning experiment on labelled pairs: GPTCache's Quora
    question pairs (``dataset: gptcache_qqp``) or the user's (``pairs.path``; ``dataset`` is
    then ``pairs``). ``heldout``: an explicit held-out pairs file instead of the component
    split; ``transfer``: other labelled traffic the chosen threshold is measured on."""

    name: RunName = "qqp-cache"
    dataset: Literal["gptcache_qqp", "pairs"] = "gptcache_qqp"
    pairs: PairsSpec = PairsSpec()
    heldout: PairsSource | None = None
    distractors: int = Field(0, ge=0, description="extra stored questions from other pairs")
    distractors_file: TextsSource | None = None
    transfer: list[PairsSource] = Field(default_factory=list)
    probe_side: Literal["text_a", "text_b"] = "text_b"
    split: SplitSpec = SplitSpec()
    embedder: EmbedderSpec = EmbedderSpec()
    cache: CacheIndexSpec = CacheIndexSpec()
    tuning: TuningSpec = TuningSpec()
    latency: LatencySpec = LatencySpec()
    cost: CostSpec = CostSpec()
    export: ExportSpec = ExportSpec()
    #: per-entry thresholds judged against the global one (retrieval.adaptive.cache)
    adaptive: CacheAdaptiveSpec | None = None
    source: str = Field("<memory>", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _dataset_from_pairs(cls, data: Any) -> Any:
        """``pairs.path`` given and ``dataset`` not: the user's pairs."""
        if isinstance(data, Mapping) and "dataset" not in data:
            pairs = data.get("pairs")
            if isinstance(pairs, Mapping) and pairs.get("path") is not None:
                return {**data, "dataset": "pairs"}
        return data

    @property
    def data_name(self) -> str:
        """What the records call the data: ``gptcache_qqp`` or ``pairs:<file name>``."""
        if self.pairs.path is None:
            return self.dataset
        return f"pairs:{Path(self.pairs.path).name}"


def check_cache_spec(spec: CacheTuneSpec, source: str) -> CacheTuneSpec:
    """Cross-field checks; relative file paths made absolute against the spec file's folder
    (so the run records and an export name files that verify finds from anywhere)."""
    from retrieval.errors import param_error
    from retrieval.paths import resolve_spec_path as resolve_path

    if spec.dataset == "pairs" and spec.pairs.path is None:
        raise param_error("pairs.path", "a labelled pairs file when dataset is 'pairs'", None,
                          where=source)
    if spec.dataset == "gptcache_qqp" and spec.pairs.path is not None:
        raise param_error("dataset", "'pairs' (or absent) when pairs.path is given",
                          spec.dataset, where=source)
    if spec.heldout is not None and spec.pairs.path is None:
        raise param_error("heldout", "absent unless pairs.path is given (an explicit held-out "
                          "file goes with the user's own pairs)", spec.heldout.path,
                          where=source)
    update: dict[str, Any] = {}
    if spec.pairs.path is not None:
        update["pairs"] = spec.pairs.model_copy(
            update={"path": resolve_path(spec.pairs.path, source)})
    for key in ("heldout", "distractors_file"):
        src = getattr(spec, key)
        if src is not None:
            update[key] = src.model_copy(update={"path": resolve_path(src.path, source)})
    if spec.transfer:
        update["transfer"] = [t.model_copy(update={"path": resolve_path(t.path, source)})
                              for t in spec.transfer]
    return spec.model_copy(update=update) if update else spec


def parse_cache_spec(data: Mapping[str, Any] | Any, source: str = "<memory>") -> CacheTuneSpec:
    return load_model(data, CacheTuneSpec, source=source, extra={"source": source},
                      check=lambda s: check_cache_spec(s, source))


def load_cache_spec(path: str | Path) -> CacheTuneSpec:
    """Read and validate a cache tuning spec; errors name the file."""
    return load_model(path, CacheTuneSpec, extra={"source": str(path)},
                      check=lambda s: check_cache_spec(s, str(path)))


__all__ = [
    "CacheIndexSpec",
    "CacheTuneSpec",
    "CostSpec",
    "EmbedderSpec",
    "ExportSpec",
    "LatencySpec",
    "PairsSource",
    "PairsSpec",
    "SplitSpec",
    "TextsSource",
    "TuningSpec",
    "check_cache_spec",
    "load_cache_spec",
    "parse_cache_spec",
]
