"""Seeded subsets and splits: the one place a random choice of queries or rows is made."""

from __future__ import annotations

import numpy as np


def seeded_partition(n: int, n_first: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``0..n-1`` split by one seeded permutation: the first ``n_first`` of it and
    the rest, each sorted ascending (int64)."""
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:n_first]), np.sort(perm[n_first:])


def seeded_subset(n: int, size: int, seed: int) -> np.ndarray:
    """``size`` distinct positions of ``0..n-1`` chosen with ``seed``, sorted ascending."""
    return np.sort(np.random.default_rng(seed).choice(n, size, replace=False))


__all__ = ["seeded_partition", "seeded_subset"]
