"""One-sided upper confidence bounds on a binomial proportion (e.g. a false-hit rate).

``upper_bound(k, n, confidence, method)`` is vectorised over ``k`` and ``n``:

- ``wilson``: the upper end of the Wilson score interval with ``z = Phi^-1(confidence)``
  (one-sided), ``(p + z^2/2n + z*sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``;
- ``clopper_pearson``: the exact bound ``Beta^-1(confidence; k + 1, n - k)`` (1 when k = n).

Quantiles come from scipy. ``n = 0`` gives 1.0 (nothing is known). The two-sided scipy
``binomtest(k, n).proportion_ci(confidence_level=2c - 1)`` upper ends equal these one-sided
bounds (tests pin both against it and against hand-computed values).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from retrieval.errors import param_error

BoundMethod = Literal["wilson", "clopper_pearson"]
METHODS: tuple[str, ...] = ("wilson", "clopper_pearson")


def _check(k: np.ndarray, n: np.ndarray, confidence: float) -> None:
    if not 0.5 <= confidence < 1.0:
        raise param_error("confidence", "in [0.5, 1) (one-sided level)", confidence)
    if np.any(n < 0) or np.any(k < 0) or np.any(k > n):
        raise param_error("k, n", "counts with 0 <= k <= n", (k.tolist(), n.tolist()))


def wilson_upper(k: np.ndarray | int, n: np.ndarray | int, confidence: float = 0.95) -> np.ndarray:
    """One-sided Wilson score upper bound on k/n at level ``confidence`` (float64 array)."""
    from scipy.stats import norm

    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    _check(k_arr, n_arr, confidence)
    z = float(norm.ppf(confidence))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k_arr / n_arr
        z2n = z * z / n_arr
        centre = p + z2n / 2.0
        half = z * np.sqrt(p * (1.0 - p) / n_arr + z2n / (4.0 * n_arr))
        out = (centre + half) / (1.0 + z2n)
    return np.where(n_arr == 0, 1.0, np.minimum(out, 1.0))


def clopper_pearson_upper(
    k: np.ndarray | int, n: np.ndarray | int, confidence: float = 0.95
) -> np.ndarray:
    """One-sided exact (Clopper-Pearson) upper bound on k/n at level ``confidence``."""
    from scipy.stats import beta

    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    _check(k_arr, n_arr, confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = beta.ppf(confidence, k_arr + 1.0, np.maximum(n_arr - k_arr, 1e-300))
    return np.where((n_arr == 0) | (k_arr >= n_arr), 1.0, out)


def upper_bound(
    k: np.ndarray | int, n: np.ndarray | int, confidence: float = 0.95,
    method: str = "wilson",
) -> np.ndarray:
    """Dispatch to :func:`wilson_upper` or :func:`clopper_pearson_upper`."""
    if method == "wilson":
        return wilson_upper(k, n, confidence)
    if method == "clopper_pearson":
        return clopper_pearson_upper(k, n, confidence)
    raise param_error("bound", f"one of {', '.join(METHODS)}", method)


__all__ = ["METHODS", "BoundMethod", "clopper_pearson_upper", "upper_bound", "wilson_upper"]
