"""The typed ``adaptive`` entries of a summary (sweep: one per index entry x policy; ``rwb tune
cache``: the per-entry threshold policy). Every entry has ``cost_unit``, ``mean``, ``p5`` and
``vs_fixed`` (the tuned fixed setting at the same quality, its cost and the ratio)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from retrieval.runs import SummaryPart


class VsFixed(SummaryPart):
    """The tuned fixed setting at the policy's quality: the knob and its ``value`` (None: no
    fixed value in ``searched`` reaches it), its ``cost`` in the policy's cost unit, its mean
    and p5, ``ratio`` = policy cost / fixed cost (a hit-rate ratio for the cache: per-entry /
    global), ``winner`` (``fixed`` | ``policy``; the fixed setting wins a tie) and ``verdict``
    (one line saying which wins)."""

    knob: str | None = None
    value: Any = None
    searched: list[Any] | None = None
    cost: float | None = None
    mean: float | None = None
    p5: float | None = None
    p50_ms: float | None = None
    ratio: float | None = None
    winner: str | None = None
    verdict: str | None = None


class AdaptiveEntry(SummaryPart):
    """One adaptive policy judged on held-out queries: ``cost`` (mean per query, in
    ``cost_unit``), ``mean`` and ``p5`` of the per-query quality (recall@k by id; for the
    cache: see its docs), ``p50_ms`` (the policy's per-query ms, every search it made),
    ``detail`` (the fitted table, the rounds), ``vs_fixed``; ``skipped``: why it did not run."""

    policy: str | None = None
    label: str | None = None
    backend: str | None = None
    build: dict[str, Any] = Field(default_factory=dict)
    cost_unit: str | None = None
    cost: float | None = None
    mean: float | None = None
    p5: float | None = None
    p50_ms: float | None = None
    n_queries: int | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    vs_fixed: VsFixed | None = None
    skipped: str | None = None
