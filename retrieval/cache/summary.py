"""The summary.json of ``rwb tune cache`` (run kind ``cache-tune``): its typed model."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from retrieval.adaptive.result import AdaptiveEntry
from retrieval.runs import RunKind, RunSummary, SummaryPart, run_summary


class CacheRates(SummaryPart):
    """Outcome counts and per-probe rates of one split at the chosen threshold."""

    threshold: float | None = None
    probes: int | None = None
    positive_probes: int | None = None
    hits: int | None = None
    correct_hits: int | None = None
    false_hits: int | None = None
    hit_rate: float | None = None
    correct_hit_rate: float | None = None
    false_hit_rate: float | None = None
    precision: float | None = None
    duplicate_recall: float | None = None
    false_hit_upper_bound: float | None = None


@run_summary
class CacheTuneSummary(RunSummary):
    """summary.json of ``rwb tune cache`` (cosine distances; rates per probe; ms; USD)."""

    KIND: ClassVar[RunKind] = RunKind("cache-tune")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("threshold", "curve", "max_false_hit")
    RANK: ClassVar[int] = 7

    kind: RunKind = KIND
    name: str | None = None
    threshold: float | None = None  # cosine distance; None when no threshold met the cap
    threshold_unit: str | None = None
    threshold_equivalents: dict[str, float | None] | None = None
    feasible: bool | None = None
    reason: str | None = None
    max_false_hit: float | None = None
    confidence: float | None = None
    bound: str | None = None
    false_hit_upper_bound: float | None = None
    tuning_false_hit_rate: float | None = None
    tuning_hit_rate: float | None = None
    heldout_hit_rate: float | None = None
    heldout_false_hit_rate: float | None = None
    heldout_false_hit_upper_bound: float | None = None
    heldout_precision: float | None = None
    heldout_meets_cap: bool | None = None
    tuning: CacheRates | None = None
    heldout: CacheRates | None = None
    latency_ms: dict[str, dict[str, Any]] = Field(default_factory=dict)
    cost: dict[str, Any] = Field(default_factory=dict)
    timing_s: dict[str, Any] = Field(default_factory=dict)
    design: dict[str, Any] = Field(default_factory=dict)
    knn_check: dict[str, Any] = Field(default_factory=dict)
    embedder: str | None = None
    dim: int | None = None
    redis: dict[str, Any] = Field(default_factory=dict)
    index: dict[str, Any] | None = None
    live_lookup_agreement: dict[str, Any] | None = None
    dataset: dict[str, Any] | None = None  # name, files, fingerprint of the labelled data
    transfer: list[dict[str, Any]] = Field(default_factory=list)  # the transfer checks
    curve: list[dict[str, Any]] = Field(default_factory=list)
    #: per-entry thresholds vs the global one (spec ``adaptive:`` only)
    adaptive: list[AdaptiveEntry] | None = None
