"""The summary.json of ``rwb bench churn`` (:class:`ChurnBenchSummary`)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from retrieval.runs.kinds import RunKind, RunSummary, run_summary


@run_summary
class ChurnBenchSummary(RunSummary):
    """Recall under inserts and deletes: per config, per step (``steps``: ``op``, ``live``,
    ``recall`` / ``recall_p5`` / ``recall_lower``, ``control_recall``, ``drift``, ``damage``
    (fractions of recall), ``p50_ms`` / ``p95_ms`` / ``p99_ms`` (single-query search),
    ``short_queries``, ``dead_fraction``, ``memory_bytes``, ``tuned_knob``, write throughput
    (per s) and per-call latency percentiles (ms), ``maintain_s``) and one ``advice`` line."""

    KIND: ClassVar[RunKind] = RunKind("bench-churn")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("configs", "runbook", "target_recall")
    RANK: ClassVar[int] = 5

    name: str | None = None
    dataset: str | None = None
    #: sha256 (16 hex) of the data (base + queries) and of the resolved runbook measured
    data_fingerprint: str | None = None
    runbook_fingerprint: str | None = None
    k: int | None = None
    n_queries: int | None = None
    target_recall: float | None = None
    runbook: dict[str, Any] = Field(default_factory=dict)
    configs: list[dict[str, Any]] = Field(default_factory=list)
    resumed: dict[str, Any] | None = None


__all__ = ["ChurnBenchSummary"]
