"""Query shift: how production queries differ from lab queries, in the knob they need.

Definitions (docs/live.md):

- the **set knob** of a query set is what the target search finds on it (the smallest knob value
  whose recall lower bound meets the target); the **inflation factor** is
  ``production set knob / lab set knob``;
- the **per-query knob** is the smallest value of a doubling ladder of the knob's range
  (``low, 2*low, 4*low, ..., high``) at which the query alone reaches recall@k >= the target
  (None when even ``high`` does not); a query **needs more than twice the lab knob** when its
  per-query knob is above ``2 * lab set knob`` or None;
- the **out-of-distribution score** of a query is the percentile (0..1) of its exact k-th
  neighbour distance among the lab queries' exact k-th neighbour distances (the collection's own
  k-NN distance distribution when the lab queries are sampled from it): 1.0 = farther from its
  neighbours than every lab query;
- **AUROC** of that score for flagging the queries that need more than twice the lab knob (the
  Mann-Whitney statistic, ties counted half; None when every query falls in one class).
"""

from __future__ import annotations

import numpy as np


def ladder(low: int, high: int) -> list[int]:
    """``low, 2*low, 4*low, ...`` below ``high``, then ``high`` (low >= 1)."""
    out, v = [], max(1, int(low))
    while v < high:
        out.append(v)
        v *= 2
    out.append(int(high))
    return out


def per_query_knob(values: list[int], recalls: np.ndarray, target: float) -> list[int | None]:
    """``recalls`` (len(values), nq): each query's recall at each ladder value -> the smallest
    value reaching ``target`` (None: none)."""
    out: list[int | None] = []
    for q in range(recalls.shape[1]):
        hit = np.nonzero(recalls[:, q] >= target - 1e-9)[0]
        out.append(int(values[hit[0]]) if hit.size else None)
    return out


def ood_scores(kth: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Percentile (0..1) of each of ``kth`` within ``reference`` (share of reference <= it)."""
    ref = np.sort(np.asarray(reference, dtype=np.float64))
    if ref.size == 0:
        return np.full(len(kth), np.nan)
    return np.searchsorted(ref, np.asarray(kth, dtype=np.float64), side="right") / ref.size


def auroc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Area under the ROC curve of ``scores`` for the True ``labels`` (ties half)."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return None
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


__all__ = ["auroc", "ladder", "ood_scores", "per_query_knob"]
