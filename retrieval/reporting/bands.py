"""Confidence bands for the report's curves: a percentile bootstrap over queries for a mean
metric (nDCG over a few dozen queries is noisy), a Wilson score interval for a rate of
events (hits per probe). Two-sided, at ``level`` (0.95: the 2.5th .. 97.5th percentiles)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def bootstrap_interval(values: Sequence[float] | np.ndarray, level: float = 0.95,
                       resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values`` (resampling them with
    replacement; seeded, so a report is reproducible). NaN, NaN when there is no value."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan")
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    return float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))


def wilson_interval(k: Sequence[float] | np.ndarray, n: Sequence[float] | np.ndarray | float,
                    level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of the rates k/n (vectorised); (0, 1) where n = 0."""
    from scipy.stats import norm

    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.broadcast_to(np.asarray(n, dtype=np.float64), k_arr.shape)
    z = float(norm.ppf(1.0 - (1.0 - level) / 2.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k_arr / n_arr
        z2n = z * z / n_arr
        centre = (p + z2n / 2.0) / (1.0 + z2n)
        half = z * np.sqrt(p * (1.0 - p) / n_arr + z2n / (4.0 * n_arr)) / (1.0 + z2n)
    empty = n_arr <= 0
    return (np.where(empty, 0.0, np.maximum(centre - half, 0.0)),
            np.where(empty, 1.0, np.minimum(centre + half, 1.0)))


def per_query_bands(rows: Sequence[Mapping[str, Any]], metric: str,
                    splits: Mapping[str, Sequence[str]], level: float = 0.95
                    ) -> dict[str, dict[int, tuple[float, float]]]:
    """``{split: {depth: (low, high)}}``: the bootstrap interval of ``metric``'s mean over the
    split's queries, from per-query rows (``depth``, ``query_id``, metric columns)."""
    by: dict[int, dict[str, float]] = {}
    for r in rows:
        v = r.get(metric)
        if v is not None:
            by.setdefault(int(r["depth"]), {})[str(r["query_id"])] = float(v)
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for split, ids in splits.items():
        for depth, vals in sorted(by.items()):
            xs = [vals[q] for q in ids if q in vals]
            if xs:
                out.setdefault(split, {})[depth] = bootstrap_interval(xs, level, seed=depth)
    return out


__all__ = ["bootstrap_interval", "per_query_bands", "wilson_interval"]
