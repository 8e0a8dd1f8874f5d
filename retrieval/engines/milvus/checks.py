"""The Milvus backend's check against a silent brute-force fallback (unflushed rows, dropped
params): recall at both ends of the index's search knob."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from retrieval.engines.milvus.common import WHERE
from retrieval.errors import BackendError
from retrieval.indexes.brute_check import BruteForceCheck, recall
from retrieval.timing import timed

log = logging.getLogger(__name__)


def brute_force_check(index: Any, queries: np.ndarray, k: int, exact_ids: np.ndarray,
                      *, raise_on_failure: bool = True) -> BruteForceCheck:
    """:meth:`MilvusIndex.verify_not_brute_force` (see there; ``index`` is that
    MilvusIndex, typed ``Any`` so this helper does not import the module that imports it); the
    searches are timed through :mod:`retrieval.timing` (``extra['ms_low']``, ``extra['ms_high']``).
    """
    kind = index.build_params
    exact = np.asarray(exact_ids)[:, :k]
    if not kind.knob:
        return BruteForceCheck(True, "", 0, 0, float("nan"), float("nan"), False,
                               f"index_type {kind.index_type} has no search knob to vary")
    low, high = index.knob_range(kind.knob, kind, k)
    high = min(high, int(kind.most_accurate()[kind.knob]))
    saved = index.search_params
    try:
        index.set_search_params(**{kind.knob: low})
        with timed() as t_low:
            r_low = index.search(queries, k)
        index.set_search_params(**{kind.knob: high})
        with timed() as t_high:
            r_high = index.search(queries, k)
    finally:
        index.search_params = saved
    rec_low, rec_high = recall(r_low.ids, exact, k), recall(r_high.ids, exact, k)
    identical = bool(np.array_equal(r_low.ids, r_high.ids))
    ok = not (identical and rec_low >= 1.0)
    reason = (
        "recall or results move with the knob" if ok else
        f"exact results with identical ids at {kind.knob}={low} and {kind.knob}={high}: "
        f"a silent brute-force fallback (index_type {kind.index_type} on {index.where})"
    )
    check = BruteForceCheck(
        ok, kind.knob, low, high, rec_low, rec_high, identical, reason,
        extra={"ms_low": t_low.ms, "ms_high": t_high.ms, "nq": len(exact)},
    )
    log.info("milvus brute-force check: %s", check)
    if not ok and raise_on_failure:
        raise BackendError(f"{WHERE}: {reason}")
    return check


__all__ = ["brute_force_check"]
