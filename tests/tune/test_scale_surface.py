"""knob(N), the miss-rate surface model beside the fitted knob: on a clustered-like case with
a known growing ef(N) (the knob sits at the floor of its range at every sample, as on the 1M
clustered set), the old model's transfer error and the new one's, side by side."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.tune import scale as sc
from retrieval.tune.scale_surface import fit_surface, predict_surface
from tests.helpers import law_curves, law_exact_knob

TARGET, MARGIN, LOW, HIGH = 0.95, 0.01, 10, 512
SIZES, FULL = (2000, 4000, 8000), 64000
PROBES = (10, 20, 40, 80, 160, 512)


def _miss(n: float, ef: float, hardness: np.ndarray) -> np.ndarray:
    """The known law: per-query miss rate 2e-4 * h_q * N^0.8 / ef (h_q: per-query hardness,
    mean 1), so ef(N) grows as N^0.8 once it leaves the floor."""
    return np.minimum(1.0, 2e-4 * hardness * n ** 0.8 / ef)


def _curves() -> tuple[list[sc.Curve], np.ndarray]:
    rng = np.random.default_rng(0)
    hard = rng.lognormal(0.0, 0.5, size=400)
    hard /= hard.mean()
    return law_curves(lambda n, v: _miss(n, v, hard), SIZES, PROBES, MARGIN, HIGH), hard


def _exact(hard: np.ndarray) -> int:
    return law_exact_knob(lambda n, v: _miss(n, v, hard), FULL, LOW, HIGH, TARGET, MARGIN)


def _knob_at(y: float) -> int:
    return int(min(max(math.ceil(y - 1e-9), LOW), HIGH))


def test_new_model_transfers_where_the_old_one_sits_at_the_floor() -> None:
    curves, hard = _curves()
    exact = _exact(hard)
    knobs = [c.knob(TARGET) for c in curves]
    assert knobs == [LOW, LOW, LOW] and exact > 3 * LOW  # floored at every sample, grown at N
    old_fit, _ = sc.choose_fit(list(SIZES), knobs)
    old = _knob_at(old_fit.predict(FULL))
    new, surface = predict_surface(curves, TARGET, FULL, lambda n, k: k, _knob_at)
    assert surface is not None and new is not None
    assert surface.alpha == pytest.approx(0.8, abs=0.05) and surface.beta == pytest.approx(1.0,
                                                                                          abs=0.05)
    errors = {"transfer_error": sc.transfer_error(old, exact),
              "transfer_error_surface": sc.transfer_error(new, exact)}
    assert errors["transfer_error"] is not None and errors["transfer_error"] < -0.5
    assert errors["transfer_error_surface"] is not None
    assert abs(errors["transfer_error_surface"]) <= 0.15  # the goal, on this law
    assert surface.to_dict()["model"] == "miss surface"


def test_surface_needs_two_sizes_and_two_knob_values() -> None:
    curves, _ = _curves()
    assert fit_surface(curves[:1], TARGET, lambda n, k: k) is None  # one size: no alpha
    flat = [sc.Curve(c.n, (10,), c.per_query[:1], (MARGIN,), HIGH) for c in curves]
    assert fit_surface(flat, TARGET, lambda n, k: k) is None  # one knob value: no beta
    perfect = [sc.Curve(c.n, c.values, np.ones_like(c.per_query), c.margin, HIGH)
               for c in curves]
    assert fit_surface(perfect, TARGET, lambda n, k: k) is None  # recall 1: no slope
