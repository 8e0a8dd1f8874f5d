"""What a check against a silent brute-force fallback reports (unflushed rows, dropped params,
an unindexed collection): recall at both ends of an index's search knob. Each engine runs its own
check (e.g. :mod:`retrieval.engines.milvus.checks`, :mod:`retrieval.indexes.knob_check`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.stats.metrics import recall_by_id


@dataclass(frozen=True)
class BruteForceCheck:
    """Outcome of :meth:`MilvusIndex.verify_not_brute_force`.

    Recall is id-intersection recall@k (mean over queries, 0..1) at the lowest and the highest
    value of the knob; ``ok`` is False when the index answered exactly at both ends with
    identical ids, the signature of a silent brute-force fallback.
    """

    ok: bool
    knob: str
    low: int
    high: int
    recall_low: float
    recall_high: float
    identical: bool
    reason: str
    extra: dict[str, Any] = field(default_factory=dict)


def recall(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Mean id-intersection recall@k (0..1): :func:`retrieval.stats.metrics.recall_by_id`."""
    return float(recall_by_id(np.asarray(found), np.asarray(exact), k).mean())


__all__ = ["BruteForceCheck", "recall"]
