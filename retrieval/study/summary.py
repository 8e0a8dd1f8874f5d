"""The summary.json of the cross-layer study (run kind ``rag-study``): its typed model."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from retrieval.runs import RunKind, RunSummary, run_summary


@run_summary
class StudySummary(RunSummary):
    """summary.json of the cross-layer study (``rag-study``): objectives, constraints, the Pareto
    set found by Optuna and the exhaustive front, the choice and the untuned default on both
    splits, the paired significance test, what each leg measured, timings (s)."""

    KIND: ClassVar[RunKind] = RunKind("rag-study")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("pareto_set", "objectives")
    RANK: ClassVar[int] = 8

    kind: RunKind = KIND
    name: str | None = None
    objectives: list[dict[str, Any]] = Field(default_factory=list)
    constraints: dict[str, Any] = Field(default_factory=dict)
    target_recall: float | None = None
    models: dict[str, str] = Field(default_factory=dict)
    knobs: dict[str, Any] = Field(default_factory=dict)
    optuna: dict[str, Any] = Field(default_factory=dict)
    pareto_set: list[dict[str, Any]] = Field(default_factory=list)
    exhaustive: dict[str, Any] = Field(default_factory=dict)
    choice_rule: str | None = None
    chosen: dict[str, Any] | None = None
    default: dict[str, Any] | None = None
    significance: dict[str, Any] | None = None
    retrieval: dict[str, Any] = Field(default_factory=dict)
    cache: dict[str, Any] = Field(default_factory=dict)
    splits: dict[str, Any] = Field(default_factory=dict)
    timing_s: dict[str, float | None] = Field(default_factory=dict)
    run_id: str | None = None
