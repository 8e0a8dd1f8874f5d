"""BM25 fallback router for long-tail queries.

Every query runs the dense first stage. A query whose dense **top-1 similarity** is strictly
below ``threshold`` is answered by BM25 and skips the reranker; the others take the primary path
(dense, then the reranker at its depth). The threshold is in the dense stage's similarity unit:
cosine similarity -1..1 for ``metric: cosine`` (``1 -`` rwb's cosine distance). ``-inf`` never
routes, ``+inf`` always routes.

Tuning is offline: per-query quality of both paths (from ranx) and per-query latency of both
paths are computed once; a threshold only picks, per query, which of the two to count, so every
threshold is exact and cheap. :func:`choose_threshold` keeps the thresholds whose mean quality is
within ``tolerance`` of the best and takes the one with the lowest mean latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.errors import ConfigError, DataError, param_error
from retrieval.stats.metrics import latency_summary


def route_mask(top1: np.ndarray, threshold: float) -> np.ndarray:
    """True where the query goes to BM25: dense top-1 similarity < ``threshold``.

    A query with no dense result (top-1 ``-inf``) always goes to BM25 unless threshold is -inf.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or math.isnan(
        threshold
    ):
        raise param_error("threshold", "a number (similarity; -inf never routes)", threshold,
                          where="router")
    return np.asarray(top1, dtype=np.float64) < float(threshold)


def routed_rankings(
    query_ids: Sequence[str],
    primary: dict[str, list[str]],
    fallback: dict[str, list[str]],
    mask: np.ndarray,
) -> dict[str, list[str]]:
    """Per query, the fallback ranking where ``mask`` is True, else the primary one."""
    return {
        q: list(fallback.get(q, [])) if m else list(primary.get(q, []))
        for q, m in zip(query_ids, mask)
    }


@dataclass(frozen=True, eq=False)
class RouteInputs:
    """Per-query arrays aligned with ``query_ids`` (quality 0..1, latency ms)."""

    query_ids: tuple[str, ...]
    top1: np.ndarray
    primary_quality: np.ndarray
    fallback_quality: np.ndarray
    primary_ms: np.ndarray
    fallback_ms: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.query_ids)
        for name in ("top1", "primary_quality", "fallback_quality", "primary_ms", "fallback_ms"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (n,):
                raise DataError(f"router inputs: '{name}' has shape {arr.shape}; expected ({n},)")
            object.__setattr__(self, name, arr)

    def subset(self, ids: Sequence[str]) -> RouteInputs:
        pos = {q: i for i, q in enumerate(self.query_ids)}
        missing = [q for q in ids if q not in pos]
        if missing:
            raise DataError(f"router inputs: unknown query ids {missing[:3]}")
        idx = np.array([pos[q] for q in ids], dtype=np.int64)
        return RouteInputs(
            tuple(ids), self.top1[idx], self.primary_quality[idx], self.fallback_quality[idx],
            self.primary_ms[idx], self.fallback_ms[idx],
        )


@dataclass(frozen=True)
class RouterPoint:
    """One threshold's outcome over a set of queries (quality mean 0..1, latency in ms)."""

    threshold: float
    routed_share: float
    quality: float
    latency: dict[str, float]

    def as_row(self) -> dict[str, object]:
        t = self.threshold
        policy = "never" if t == -math.inf else "always" if t == math.inf else "threshold"
        return {
            "threshold": t if math.isfinite(t) else None,
            "policy": policy,
            "routed_share": self.routed_share,
            "quality": self.quality,
            **self.latency,
        }


def evaluate_threshold(inputs: RouteInputs, threshold: float) -> RouterPoint:
    mask = route_mask(inputs.top1, threshold)
    quality = np.where(mask, inputs.fallback_quality, inputs.primary_quality)
    ms = np.where(mask, inputs.fallback_ms, inputs.primary_ms)
    return RouterPoint(
        threshold=float(threshold),
        routed_share=float(mask.mean()),
        quality=float(quality.mean()),
        latency=latency_summary(ms),
    )


def candidate_thresholds(top1: np.ndarray, n_quantiles: int = 20) -> list[float]:
    """-inf (never), quantiles of the observed top-1 similarities, +inf (always)."""
    if n_quantiles < 1:
        raise param_error("quantiles", "an integer >= 1", n_quantiles, where="router")
    finite = np.asarray(top1, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    qs: list[float] = []
    if finite.size:
        levels = np.quantile(finite, np.linspace(0.0, 1.0, n_quantiles + 1))
        qs = sorted({round(float(v), 6) for v in levels})
    return [-math.inf, *qs, math.inf]


def sweep_thresholds(inputs: RouteInputs, thresholds: Sequence[float]) -> list[RouterPoint]:
    if not inputs.query_ids:
        raise DataError("router: no queries to tune on")
    return [evaluate_threshold(inputs, t) for t in sorted(set(thresholds))]


def choose_threshold(points: Sequence[RouterPoint], tolerance: float) -> RouterPoint:
    """Lowest mean latency among points with quality >= best - ``tolerance``; ties: higher
    quality, then less routing (lower threshold)."""
    if not points:
        raise ConfigError("router: no thresholds to choose from")
    if not 0.0 <= tolerance <= 1.0:
        raise param_error("tolerance", "in [0, 1]", tolerance, where="router")
    best = max(p.quality for p in points)
    ok = [p for p in points if p.quality >= best - tolerance - 1e-12]
    return min(ok, key=lambda p: (p.latency["mean_ms"], -p.quality, p.threshold))


__all__ = [
    "RouteInputs",
    "RouterPoint",
    "candidate_thresholds",
    "choose_threshold",
    "evaluate_threshold",
    "route_mask",
    "routed_rankings",
    "sweep_thresholds",
]
