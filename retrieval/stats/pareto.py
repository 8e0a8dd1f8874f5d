"""The one Pareto front: indices of the non-dominated points of a set of objective vectors.

A point is dominated when another is no worse in every objective and strictly better in one.
``maximize[j]`` says whether objective ``j`` is better when higher (recall, nDCG, QPS) or when
lower (latency in ms, bytes, dollars). O(n^2) in numpy; n is a few thousand at most.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pareto_indices(objs: Sequence[Sequence[float]], maximize: Sequence[bool]) -> list[int]:
    """Indices (ascending) of the non-dominated rows of ``objs`` (n, m); identical rows are all
    kept (neither dominates the other)."""
    arr = np.asarray(objs, dtype=np.float64)
    if arr.size == 0:
        return []
    signs = np.where(np.asarray(maximize, dtype=bool), 1.0, -1.0)
    a = arr * signs  # every objective: higher is better
    keep = []
    for i, row in enumerate(a):
        no_worse = (a >= row).all(axis=1)
        better = (a > row).any(axis=1)
        if not np.any(no_worse & better):
            keep.append(i)
    return keep


__all__ = ["pareto_indices"]
