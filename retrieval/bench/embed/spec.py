"""What ``rwb bench embed`` measures: :class:`EmbedBenchConfig` and its loader (YAML and/or
command-line flags, through :func:`retrieval.specfile.load_model`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from retrieval.params import Params
from retrieval.specfile import load_model

Engine = Literal["sentence-transformers", "flagembedding"]


class EmbedBenchConfig(Params):
    """What ``rwb bench embed`` measures (YAML or CLI flags; unknown keys are errors)."""

    collection: str = Field("qqp", description="text collection, or 'mixed' (qqp+reuters+scifact)")
    texts_file: str | None = Field(None, description="UTF-8 file, one text per line (overrides)")
    sample: int = Field(4000, ge=1, description="texts sampled (seeded) from the collection")
    seed: int = 0
    batch_sizes: list[int] = Field(default_factory=lambda: [1, 8, 32, 128], min_length=1)
    length_sorted: bool = Field(True, description="also measure length-sorted batches")
    token_budgets: list[int] = Field(default_factory=lambda: [4096, 16384])
    library_batch_size: int = Field(32, ge=1, description="the library encode() baseline")
    model: str | None = Field(None, description="local model folder (None: packaged MiniLM)")
    engine: Engine = "sentence-transformers"
    flag_pooling: Literal["cls", "mean"] = "cls"
    max_seq_length: int | None = Field(None, ge=1)
    single_limit: int | None = Field(
        1000, ge=1, description="one-at-a-time calls on at most this many texts (None: all)"
    )
    dtypes: list[Literal["fp32", "bf16"]] = Field(
        default_factory=lambda: ["fp32", "bf16"], min_length=1  # type: ignore[arg-type]
    )
    tolerance: float = Field(1e-4, gt=0, description="max abs diff batched vs single")
    drift_queries: int = Field(100, ge=1)
    drift_k: int = Field(10, ge=1)
    torch_threads: int | None = Field(None, ge=1)
    warmup: int = Field(2, ge=0, description="warm-up calls before timing")
    runtimes: list[str] = Field(
        default_factory=lambda: ["torch"], min_length=1,
        description="torch | torch-bf16 | onnx | onnx-int8 | openvino; torch (fp32) is always "
        "measured: it is the reference of speedups and drift")
    quality_tolerance: float = Field(
        0.99, gt=0, le=1, description="a runtime is usable when its recall@k against torch fp32 "
        "(and its SciFact recall@10 over fp32's, if measured) is >= this")
    quality: Literal["none", "scifact"] = Field(
        "none", description="also retrieve on SciFact (nDCG@10, recall@10 vs qrels) per runtime")
    quality_queries: int = Field(300, ge=1, description="SciFact queries (with judgments)")
    quality_docs: int = Field(
        2000, ge=10, description="SciFact corpus: every judged doc + seeded others, this many")
    interleave: int = Field(
        4, ge=1, le=64, description="slices of the sample; every setting runs on a slice "
        "before the next slice starts (a change of load hits all settings alike)")

    @field_validator("batch_sizes", "token_budgets")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        bad = [b for b in v if b <= 0]
        if bad:
            raise ValueError("every value must be an integer >= 1")
        return sorted(set(v))

    @field_validator("runtimes")
    @classmethod
    def _runtimes(cls, v: list[str]) -> list[str]:
        from retrieval.embed.runtimes import RUNTIMES, parse_runtime
        from retrieval.errors import ConfigError

        names = []
        for x in v:
            try:
                names.append(parse_runtime(x).name)
            except ConfigError:
                raise ValueError(
                    f"unknown runtime {x!r}; allowed: {', '.join(RUNTIMES)}") from None
        return ["torch", *dict.fromkeys(n for n in names if n != "torch")]

    @field_validator("dtypes")
    @classmethod
    def _fp32_first(cls, v: list[str]) -> list[str]:
        if "fp32" not in v:
            raise ValueError("must include fp32 (bf16 is measured against it)")
        return sorted(set(v), key=["fp32", "bf16"].index)


def load_embed_config(path: str | Path | None, **overrides: Any) -> EmbedBenchConfig:
    """A config from a YAML file (optional) with non-None ``overrides`` on top; errors name the
    file (or "bench embed" for flags) and the field."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if path is None:
        return load_model(given, EmbedBenchConfig, source="bench embed",
                          what="an embed bench config")
    where = str(path) + (" (with command-line overrides)" if given else "")
    return load_model(path, EmbedBenchConfig, source=where, what="an embed bench config",
                      extra=given)


__all__ = ["EmbedBenchConfig", "Engine", "load_embed_config"]
