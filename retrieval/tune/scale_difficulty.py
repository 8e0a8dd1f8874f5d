"""knob(N), third model: per-query DIFFICULTY (``predicted_difficulty``), beside the fitted
knob and the miss-rate surface.

The fitted knob (:func:`retrieval.tune.scale.choose_fit`) sees one number per sample size and
the surface (:mod:`retrieval.tune.scale_surface`) the MEAN miss rate of each probe. Both lose
what the samples measured per query: the same tuning queries are searched at every size, and
on clustered data most of them are perfect at the floor of the knob range on the small samples
while a few already miss; the mean over queries of a per-query law is not the law of the mean.

This model fits, over EVERY probe of every sample's search and every tuning query, the
query's miss rate ``p`` (``1 - recall@k``, out of ``k``) as a logistic law

    logit p_q(N, x) = a + u_q - beta log x + alpha log N      (variant size, the one used)
    logit p_q(N, x) = a + u_q - beta log x + gamma z_q(N)     (variant lid, beside it)

``x``: the knob (or its fraction of the range when the range grows with N); ``u_q``: the
query's own difficulty, estimated from its recalls at the samples (shrunk towards 0 by a
ridge penalty, so a query that never missed is easy, not infinitely so); ``z_q(N)``: the
query's local intrinsic dimensionality (log of the maximum-likelihood LID of its ``k`` exact
neighbour distances) in the sample of size ``N``, from the exact ground truth the study
computes anyway (at the samples for their searches, at the full N for its check). The fit is
binomial maximum likelihood (Newton steps on the shared terms and the ``u_q`` together).
The knob at the full N is the smallest ``x`` whose predicted mean recall over the tuning
queries, ``1 - mean_q p_q(N, x)`` (variant lid: with the FULL-N ``z_q``), minus the lower
bound's margin measured at the largest sample, meets the target. It uses no search of the
full-N index. Measured (docs/scale.md): closer to the exact knob than the fitted knob and the
surface on a 1M-like clustered set, yet still short of the 15% goal there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.tune.scale import Curve
from retrieval.tune.scale_surface import _margin

#: ridge penalty on the per-query effects u_q (in units of the binomial log-likelihood)
RIDGE = 1.0
#: the two forms of the law, the one used first: ``size`` (``alpha log N``) and ``lid`` (no
#: ``alpha log N`` term: the growth with N is carried by the queries' LID measured at each size)
VARIANTS = ("size", "lid")
#: Newton iterations of the fit at most
ITERATIONS = 100
_P_FLOOR = 1e-9


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def lid_feature(distances: np.ndarray, metric: str, k: int) -> np.ndarray | None:
    """log LID per query (maximum likelihood over its ``k`` nearest exact distances, rwb's
    convention: squared L2 for ``l2``, cosine distance for ``cosine``; None for inner product,
    whose scores are not distances). Duplicates (distance 0) are clipped."""
    if metric not in ("l2", "cosine") or distances.ndim != 2 or distances.shape[1] < 2:
        return None
    d = np.maximum(np.asarray(distances[:, :k], dtype=np.float64), 0.0)
    r = np.maximum(np.sqrt(d) if metric == "l2" else np.sqrt(2.0 * d), 1e-12)
    ratio = np.log(r[:, :-1] / r[:, -1:]).mean(axis=1)
    lid = -1.0 / np.minimum(ratio, -1e-6)
    return np.log(np.clip(lid, 1e-3, 1e4))


@dataclass(frozen=True)
class DifficultyFit:
    """The fitted law (see the module doc); ``effects``: the per-query ``u_q`` (tuning order);
    ``margin``: mean minus lower bound used at the full N; ``points``: probe x query rows."""

    a: float
    alpha: float
    beta: float
    gamma: float
    effects: np.ndarray
    margin: float
    points: int
    k: int
    variant: str = "size"
    #: the tuning-query positions of ``effects`` when the samples judged only some queries
    #: (``sampling: cells``: the prediction averages over the queries judged at some sample)
    queries: np.ndarray | None = None

    def recall(self, n: float, x: float, feature: np.ndarray | None) -> float:
        """Predicted mean recall over the tuning queries at ``n`` and modelled knob ``x``
        (``feature``: one value per tuning query, all of them)."""
        eta = self.a + self.alpha * math.log(n) - self.beta * math.log(x) + self.effects
        if feature is not None:
            eta = eta + self.gamma * (feature if self.queries is None else feature[self.queries])
        return float(1.0 - _sigmoid(eta).mean())

    def solve(self, n: float, target: float, feature: np.ndarray | None) -> float | None:
        """The smallest ``x`` whose predicted mean recall minus the margin meets ``target``
        (bisection on log x; None when even a huge ``x`` does not)."""
        lo, hi = math.log(1e-9), math.log(1e18)
        if self.recall(n, math.exp(hi), feature) - self.margin < target:
            return None
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if self.recall(n, math.exp(mid), feature) - self.margin >= target:
                hi = mid
            else:
                lo = mid
        return math.exp(hi)

    def to_dict(self) -> dict[str, Any]:
        return {"model": "per-query difficulty", "variant": self.variant, "a": self.a,
                "alpha": self.alpha, "beta": self.beta, "gamma": self.gamma, "margin": self.margin,
                "points": self.points, "queries": int(self.effects.size),
                "effects_sd": float(self.effects.std()) if self.effects.size else 0.0,
                "feature": "log LID of the k exact neighbour distances" if self.gamma else None,
                "formula": "logit(1 - recall_q) = a + u_q - beta log x + "
                           + ("gamma log LID_q(N)" if self.variant == "lid" else "alpha log N")}


def _rows(curves: Sequence[Curve], scale_of: Callable[[int, float], float],
          features: Sequence[np.ndarray] | None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # columns: 1, -log x, then log N (variant size) or the LID feature (variant lid)
    """Design (shared columns), miss rates and the query index of every probe x query row."""
    shared, miss, query = [], [], []
    for j, c in enumerate(curves):
        nq = c.per_query.shape[1]
        pos = c.positions()  # the tuning-query position of each column
        for v, pq in zip(c.values, c.per_query, strict=True):
            x = scale_of(c.n, float(v))
            if not x > 0:
                continue
            cols = [np.ones(nq), np.full(nq, -math.log(x)),
                    np.full(nq, math.log(c.n)) if features is None else features[j]]
            shared.append(np.column_stack(cols))
            miss.append(np.clip(1.0 - np.asarray(pq, dtype=np.float64), 0.0, 1.0))
            query.append(pos)
    return np.vstack(shared), np.concatenate(miss), np.concatenate(query)


def _loglik(eta: np.ndarray, miss: np.ndarray, u: np.ndarray, k: int) -> float:
    """Penalized binomial log-likelihood (``k`` trials per row; ridge on the effects)."""
    log_p = -np.logaddexp(0.0, -eta)
    log_q = -np.logaddexp(0.0, eta)
    return float(k * (miss * log_p + (1.0 - miss) * log_q).sum() - 0.5 * RIDGE * (u @ u))


def _fit(design: np.ndarray, miss: np.ndarray, query: np.ndarray, nq: int, k: int
         ) -> tuple[np.ndarray, np.ndarray]:
    """Binomial (``k`` trials per row) ML of the shared coefficients and the ridge-shrunk
    per-query effects: Newton steps on both at once (the effects' block of the Hessian is
    diagonal, so the step solves a small Schur complement), halved until the penalized
    likelihood rises."""
    m = design.shape[1]
    b = np.zeros(m)
    mean = min(max(float(miss.mean()), 1e-4), 1.0 - 1e-4)
    b[0] = math.log(mean / (1.0 - mean))
    u = np.zeros(nq)
    eta = design @ b
    ll = _loglik(eta, miss, u, k)
    for _ in range(ITERATIONS):
        p = _sigmoid(eta)
        wv = k * np.maximum(p * (1.0 - p), _P_FLOOR)
        resid = k * (miss - p)
        g_b = design.T @ resid
        g_u = np.bincount(query, resid, nq) - RIDGE * u
        h_bb = design.T @ (wv[:, None] * design)
        h_bu = np.stack([np.bincount(query, wv * design[:, j], nq) for j in range(m)])
        h_uu = np.bincount(query, wv, nq) + RIDGE
        schur = h_bb - (h_bu / h_uu) @ h_bu.T + 1e-9 * np.eye(m)
        d_b = np.linalg.solve(schur, g_b - h_bu @ (g_u / h_uu))
        d_u = (g_u - h_bu.T @ d_b) / h_uu
        step = 1.0
        while step > 1e-6:
            nb, nu = b + step * d_b, u + step * d_u
            n_eta = design @ nb + nu[query]
            n_ll = _loglik(n_eta, miss, nu, k)
            if n_ll >= ll - 1e-12:
                break
            step *= 0.5
        else:
            break
        gain = n_ll - ll
        b, u, eta, ll = nb, nu, n_eta, n_ll
        if gain < 1e-9 * max(1.0, abs(ll)):
            break
    return b, u


def fit_difficulty(curves: Sequence[Curve], target: float, k: int,
                   scale_of: Callable[[int, float], float],
                   features: Sequence[np.ndarray] | None = None) -> DifficultyFit | None:
    """The per-query law over every probe of ``curves`` (see the module doc); ``features``:
    one per-query array per curve (the LID feature at that size) or None. None when the
    probes do not pin it: fewer than two sizes or two knob values, no miss at all, or recall
    that does not rise with the knob."""
    if len(curves) < 2 or len({c.n for c in curves}) < 2:
        return None
    if all(c.queries is None for c in curves):
        nq = curves[0].per_query.shape[1]
        if any(c.per_query.shape[1] != nq for c in curves):
            return None
    design, miss, query = _rows(curves, scale_of, features)
    if np.ptp(design[:, 1]) == 0 or not miss.any() or bool((miss >= 1.0).all()):
        return None
    seen = np.unique(query)  # the tuning queries judged at some sample (cells: a subset)
    b, u = _fit(design, miss, query, int(seen.max()) + 1, k)
    if not (np.all(np.isfinite(b)) and b[1] > 0):
        return None
    alpha, gamma = (0.0, float(b[2])) if features is not None else (float(b[2]), 0.0)
    partial = any(c.queries is not None for c in curves)
    return DifficultyFit(float(b[0]), alpha, float(b[1]), gamma, u[seen],
                         _margin(curves[-1], target), int(miss.size), k,
                         "lid" if features is not None else "size",
                         seen if partial else None)


def predict_difficulty(curves: Sequence[Curve], target: float, n: float, k: int,
                       scale_of: Callable[[int, float], float],
                       knob_at: Callable[[float], int],
                       features: Sequence[np.ndarray] | None = None,
                       feature_at_n: np.ndarray | None = None,
                       ) -> tuple[int | None, DifficultyFit | None, dict[str, int | None]]:
    """(knob at ``n`` by the per-query law, its fit, every variant's knob at ``n``):
    ``knob_at`` turns a modelled value into a knob in the range at ``n`` (the top of the
    range when none meets). The variant used is ``size`` (measured closer to the exact knob
    than ``lid`` on a clustered set where the knob sits at its floor on the small samples;
    ``lid`` is the closer one where the small samples are harder than the full N); ``lid``
    is fitted beside it when the LID feature is given at every sample size AND at ``n``."""
    have_lid = features is not None and feature_at_n is not None
    knobs: dict[str, int | None] = {}
    fits: dict[str, DifficultyFit] = {}
    for variant in VARIANTS if have_lid else ("size",):
        lid = variant == "lid"
        f = fit_difficulty(curves, target, k, scale_of, features if lid else None)
        knobs[variant] = None
        if f is not None:
            x = f.solve(n, target, feature_at_n if lid else None)
            knobs[variant], fits[variant] = knob_at(1e18 if x is None else x), f
    for variant in VARIANTS:
        if variant in fits:
            return knobs[variant], fits[variant], knobs
    return None, None, knobs


__all__ = ["DifficultyFit", "fit_difficulty", "lid_feature", "predict_difficulty"]
