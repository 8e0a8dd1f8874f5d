"""knob(N), second model: the miss-rate SURFACE over (knob, N), beside the fitted knob.

The first model (:func:`retrieval.tune.scale.choose_fit`) fits the cheapest knob found at each
sample size against N. On clustered data that loses what matters: at the small samples the
knob sits at the floor of its range (the lowest value already meets the target), so its fit is
flat while the knob at the full N has grown. The recall the searches measured there still
carries the growth: at a fixed knob the miss rate (1 - mean recall) rises with N.

This model uses EVERY probe of every sample's search (:class:`~retrieval.tune.scale.Curve`),
not only the answers: the miss rate is fitted as a power surface

    log(1 - recall) = a + alpha * log N - beta * log x

(``x`` is the knob, or its fraction of the range when the range grows with N), pooled least
squares over the probes whose miss rate is in ``(0, 1)``; the knob at the full N is the
smallest ``x`` with ``1 - recall <= 1 - target - margin`` (``margin``: the gap between the mean
and its lower bound measured at the largest sample, near the target). It needs probes at two
sample sizes and two knob values with a miss rate in ``(0, 1)``, and ``beta > 0`` (recall that
rises with the knob); otherwise it predicts nothing (``None``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.tune.scale import Curve

#: miss rates below this are treated as 0 (recall exactly 1: carries no slope)
MISS_FLOOR = 1e-6


@dataclass(frozen=True)
class Surface:
    """``log(miss) = a + alpha log N - beta log x``; ``margin``: mean minus lower bound used at
    the full N; ``points``: probes fitted."""

    a: float
    alpha: float
    beta: float
    margin: float
    points: int

    def miss(self, n: float, x: float) -> float:
        return math.exp(self.a + self.alpha * math.log(n) - self.beta * math.log(x))

    def solve(self, n: float, target: float) -> float | None:
        """The smallest ``x`` (knob or range fraction) whose predicted mean recall at ``n``
        minus the margin meets ``target`` (None when no miss rate is allowed: target + margin
        >= 1)."""
        allowed = 1.0 - target - self.margin
        if allowed <= 0:
            return None
        return math.exp((self.a + self.alpha * math.log(n) - math.log(allowed)) / self.beta)

    def to_dict(self) -> dict[str, Any]:
        return {"model": "miss surface", "a": self.a, "alpha": self.alpha, "beta": self.beta,
                "margin": self.margin, "points": self.points,
                "formula": f"1 - recall = {math.exp(self.a):.4g} * N^{self.alpha:.4f} * "
                           f"x^-{self.beta:.4f}"}


def fit_surface(curves: Sequence[Curve], target: float,
                scale_of: Callable[[int, float], float]) -> Surface | None:
    """The miss-rate surface over every probe of ``curves`` (see the module doc);
    ``scale_of(n, knob)`` maps a knob to what is modelled (the knob, or its range fraction)."""
    rows: list[tuple[float, float, float]] = []
    for c in curves:
        means = c.per_query.mean(axis=1)
        for v, mean in zip(c.values, means, strict=True):
            miss = 1.0 - float(mean)
            x = scale_of(c.n, float(v))
            if MISS_FLOOR < miss < 1.0 and x > 0:
                rows.append((math.log(c.n), math.log(x), math.log(miss)))
    if len(rows) < 3:
        return None
    arr = np.asarray(rows)
    if np.ptp(arr[:, 0]) == 0 or np.ptp(arr[:, 1]) == 0:
        return None
    design = np.column_stack([np.ones(len(arr)), arr[:, 0], -arr[:, 1]])
    coef, *_ = np.linalg.lstsq(design, arr[:, 2], rcond=None)
    a, alpha, beta = (float(v) for v in coef)
    if not beta > 0:
        return None
    return Surface(a, alpha, beta, _margin(curves[-1], target), len(rows))


def _margin(curve: Curve, target: float) -> float:
    """The lower bound's margin at the largest sample, at the probe whose mean is nearest the
    target (the bound's width there is what the full-N knob must clear)."""
    means = curve.per_query.mean(axis=1)
    i = int(np.argmin(np.abs(means - target)))
    return float(curve.margin[i])


def predict_surface(curves: Sequence[Curve], target: float, n: float,
                    scale_of: Callable[[int, float], float],
                    knob_at: Callable[[float], int]) -> tuple[int | None, Surface | None]:
    """(knob at ``n`` by the surface, the fitted surface): ``knob_at`` turns a modelled
    value into a knob in the range at ``n`` (the top of the range when none meets)."""
    s = fit_surface(curves, target, scale_of)
    if s is None:
        return None, None
    x = s.solve(n, target)
    return knob_at(1e18 if x is None else x), s  # None: the top of the range


__all__ = ["Surface", "fit_surface", "predict_surface"]
