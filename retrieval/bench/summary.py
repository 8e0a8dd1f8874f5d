"""Typed summary.json of the RAG-layer benchmarks (``rwb bench embed``, ``rwb bench fanout``),
written and read back through :meth:`retrieval.runs.RunDir.write_summary` / ``read_summary``."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from retrieval.runs import RunKind, RunSummary, run_summary


@run_summary
class EmbedBenchSummary(RunSummary):
    """Embedding batch sweep: throughput of the best batching setting against one text at a time
    and the library default, batched-vs-single agreement, bf16, and one row per setting."""

    KIND: ClassVar[RunKind] = RunKind("bench-embed")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("best_setting", "max_abs_diff")
    RANK: ClassVar[int] = 2

    model_id: str | None = None
    engine: str | None = None
    dim: int | None = None
    max_tokens: int | None = None
    n_texts: int | None = None
    tokens: dict[str, Any] = Field(default_factory=dict)
    single_texts_per_s: float | None = None
    best_setting: str | None = None
    best_texts_per_s: float | None = None
    speedup: float | None = None
    library_setting: str | None = None
    library_texts_per_s: float | None = None
    speedup_vs_library: float | None = None
    max_abs_diff: float | None = None
    tolerance: float | None = None
    agree: bool | None = None
    worst_setting: str | None = None
    bf16: dict[str, Any] = Field(default_factory=dict)
    speedup_vs_library_bf16: float | None = None
    runtimes: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = Field(default_factory=list)


@run_summary
class FanoutBenchSummary(RunSummary):
    """Fan-out across collections: per-mode latency (ms) and speedups against serial, the
    verdict, fused-result agreement across modes and retrieval quality."""

    KIND: ClassVar[RunKind] = RunKind("bench-fanout")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("modes", "speedup")
    RANK: ClassVar[int] = 3

    name: str | None = None
    k: int | None = None
    n_queries: int | None = None
    queries: str | None = None
    fusion: dict[str, Any] = Field(default_factory=dict)
    collections: list[dict[str, Any]] = Field(default_factory=list)
    modes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    speedup: dict[str, float | None] = Field(default_factory=dict)
    verdict: dict[str, str] = Field(default_factory=dict)
    fused_identical_across_modes: dict[str, float] = Field(default_factory=dict)
    quality: dict[str, Any] | None = None


@run_summary
class LoadBenchSummary(RunSummary):
    """Latency under load: per config its points (closed / open loop; corrected and uncorrected
    percentiles in ms, achieved vs offered QPS, recall, generator health) and ``capacity_qps``,
    the highest offered rate meeting the SLO; ``partial`` when a point was aborted."""

    KIND: ClassVar[RunKind] = RunKind("bench-load")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("configs", "slo", "client")
    RANK: ClassVar[int] = 4

    name: str | None = None
    k: int | None = None
    client: str | None = None
    slo: dict[str, Any] = Field(default_factory=dict)
    configs: list[dict[str, Any]] = Field(default_factory=list)
    health: list[str] = Field(default_factory=list)
    partial: bool | None = None
    aborted: str | None = None


__all__ = ["EmbedBenchSummary", "FanoutBenchSummary", "LoadBenchSummary"]
