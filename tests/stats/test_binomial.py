"""One-sided upper bounds on a binomial proportion, pinned to hand values and to scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from retrieval.errors import ConfigError
from retrieval.stats.binomial import clopper_pearson_upper, upper_bound, wilson_upper

Z95 = 1.6448536269514722  # Phi^-1(0.95)


def test_wilson_hand_values() -> None:
    # k = 0: the Wilson upper bound reduces to z^2 / (n + z^2)
    assert wilson_upper(0, 100, 0.95) == pytest.approx(Z95**2 / (100 + Z95**2), rel=1e-12)
    assert wilson_upper(0, 100, 0.95) == pytest.approx(0.0263427208, abs=1e-9)
    # k = 5, n = 100 by the formula written out
    p, n, z = 0.05, 100, Z95
    expect = (p + z * z / (2 * n) + z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (
        1 + z * z / n)
    assert wilson_upper(5, 100, 0.95) == pytest.approx(expect, rel=1e-12)
    assert wilson_upper(5, 100, 0.95) == pytest.approx(0.0991610853, abs=1e-9)


def test_clopper_pearson_hand_values() -> None:
    # k = 0: exact bound 1 - (1 - c)^(1/n)
    assert clopper_pearson_upper(0, 100, 0.95) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-9)
    assert clopper_pearson_upper(7, 7, 0.95) == 1.0


@pytest.mark.parametrize(("k", "n"), [(0, 100), (5, 100), (50, 1000), (3, 40), (399, 400)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_match_scipy_two_sided_upper_end(k: int, n: int, confidence: float) -> None:
    level = 2 * confidence - 1  # a two-sided interval at 2c - 1 has the one-sided bound on top
    w = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson").high
    e = binomtest(k, n).proportion_ci(confidence_level=level, method="exact").high
    assert wilson_upper(k, n, confidence) == pytest.approx(w, rel=1e-9)
    assert clopper_pearson_upper(k, n, confidence) == pytest.approx(e, rel=1e-8)


def test_vectorised_monotone_and_edge_cases() -> None:
    k = np.arange(0, 51)
    ub = upper_bound(k, np.full(51, 1000), 0.95, "wilson")
    assert np.all(np.diff(ub) > 0) and np.all(ub > k / 1000)
    assert upper_bound(0, 0, 0.95, "wilson") == 1.0
    assert upper_bound(0, 0, 0.95, "clopper_pearson") == 1.0
    # exact is the more conservative of the two for small counts
    assert clopper_pearson_upper(2, 200) > wilson_upper(2, 200)


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match=r"field 'bound' must be one of wilson, "
                                          r"clopper_pearson; received 'agresti'"):
        upper_bound(1, 10, 0.95, "agresti")
    with pytest.raises(ConfigError, match=r"field 'confidence' must be in \[0.5, 1\)"):
        wilson_upper(1, 10, 1.0)
    with pytest.raises(ConfigError, match=r"0 <= k <= n"):
        wilson_upper(11, 10)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (1, 10), (5, 100), (50, 1000), (199, 200)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_goldens_from_scipy_quantiles(k: int, n: int, confidence: float) -> None:
    """Wilson from the formula with z = scipy.stats.norm.ppf; Clopper-Pearson as the
    scipy.stats.beta.ppf quantile Beta^-1(c; k + 1, n - k)."""
    from scipy.stats import beta, norm

    z, p = float(norm.ppf(confidence)), k / n
    wilson = (p + z * z / (2 * n) + z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (
        1 + z * z / n)
    assert wilson_upper(k, n, confidence) == pytest.approx(wilson, rel=1e-12)
    assert clopper_pearson_upper(k, n, confidence) == pytest.approx(
        float(beta.ppf(confidence, k + 1, n - k)), rel=1e-10)
    assert upper_bound(k, n, confidence, "clopper_pearson") == clopper_pearson_upper(
        k, n, confidence)
