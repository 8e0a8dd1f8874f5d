"""The typed summary.json of an ``rwb profile`` run (see :mod:`retrieval.profiling.run`)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from retrieval.runs.kinds import RunKind, RunSummary, run_summary


@run_summary
class ProfileSummary(RunSummary):
    """A pipeline profile: ``stages`` (each ``name``, ``n``, ``p50_ms`` / ``p95_ms`` /
    ``p99_ms`` and ``shares`` of the end-to-end percentiles), ``end_to_end`` and ``overhead``
    percentiles (ms), ``tail`` attribution, ``exemplars``, ``quality``, ``cache``, ``load`` (one
    row per open-loop rate, corrected percentiles) and ``remedies`` (the measured waterfall)."""

    KIND: ClassVar[RunKind] = RunKind("profile")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("stages", "end_to_end", "tail")
    RANK: ClassVar[int] = 9

    kind: str | None = None
    name: str | None = None
    queries: str | None = None
    mode: str | None = None
    k: int | None = None
    collections: list[dict[str, Any]] = Field(default_factory=list)
    stages: list[dict[str, Any]] = Field(default_factory=list)
    end_to_end: dict[str, Any] = Field(default_factory=dict)
    overhead: dict[str, Any] = Field(default_factory=dict)
    tail: dict[str, Any] = Field(default_factory=dict)
    exemplars: list[dict[str, Any]] = Field(default_factory=list)
    quality: dict[str, Any] | None = None
    cache: dict[str, Any] | None = None
    load: list[dict[str, Any]] | None = None
    remedies: dict[str, Any] | None = None
    compare: dict[str, Any] | None = None


__all__ = ["ProfileSummary"]
