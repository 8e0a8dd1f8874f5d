"""``scale.sampling: neighbourhood``: every sample holds the tuning queries' full-N
neighbourhood (the core) plus a nested uniform fill."""

from __future__ import annotations

import numpy as np

from retrieval.tune.scale import neighbourhood_rows


def test_core_in_every_sample_nested_and_sized() -> None:
    rng = np.random.default_rng(0)
    n = 10_000
    neighbours = rng.integers(0, n, size=(20, 1000)).astype(np.int64)
    rows, h = neighbourhood_rows(n, [1000, 2000, 4000], 7, neighbours)
    assert h == 20  # 20 queries x 20 neighbours <= 500 rows; 50 would not fit
    core = np.unique(neighbours[:, :h])
    for size, r in zip([1000, 2000, 4000], rows, strict=True):
        assert r.size == size and np.unique(r).size == size
        assert np.isin(core, r).all()
        assert r.min() >= 0 and r.max() < n
    assert np.isin(rows[0], rows[1]).all() and np.isin(rows[1], rows[2]).all()


def test_no_width_fits_gives_uniform_samples() -> None:
    neighbours = np.arange(2000 * 10).reshape(2000, 10) % 5000
    rows, h = neighbourhood_rows(5000, [100, 200], 0, neighbours)
    assert h == 0 and [r.size for r in rows] == [100, 200]
