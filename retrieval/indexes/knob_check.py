"""The check against a silent brute force for engine backends with one monotone knob (qdrant's
``hnsw_ef``, redis's ``EF_RUNTIME``): recall at both ends of the knob must differ, or the ids
must. Not a backend module. Same outcome type as Milvus's check
(:class:`retrieval.indexes.brute_check.BruteForceCheck`)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from retrieval.errors import BackendError
from retrieval.indexes.brute_check import BruteForceCheck, recall
from retrieval.timing import timed

log = logging.getLogger(__name__)


def knob_check(index: Any, knob: str, queries: np.ndarray, k: int, exact_ids: np.ndarray, *,
               why: str, raise_on_failure: bool = True) -> BruteForceCheck:
    """Search ``queries`` at the lowest and highest value of ``knob`` (``index.knob_range``,
    capped at ``most_accurate_search``); exact answers with identical ids at both ends mean the
    engine never used its index (``why`` says what rwb set so that it would). Search params are
    restored after; searches timed with :mod:`retrieval.timing` (``extra['ms_low'|'ms_high']``)."""
    cls = type(index)
    exact = np.asarray(exact_ids)[:, :k]
    low, high = cls.knob_range(knob, index.build_params, k)
    high = min(high, int(cls.most_accurate_search(index.build_params)[knob]))
    saved = index.search_params
    try:
        index.set_search_params(**{knob: low})
        with timed() as t_low:
            r_low = index.search(queries, k)
        index.set_search_params(**{knob: high})
        with timed() as t_high:
            r_high = index.search(queries, k)
    finally:
        index.set_search_params(**saved.model_dump())
    rec_low, rec_high = recall(r_low.ids, exact, k), recall(r_high.ids, exact, k)
    identical = bool(np.array_equal(r_low.ids, r_high.ids))
    ok = not (identical and rec_low >= 1.0)
    reason = ("recall or results move with the knob" if ok else
              f"exact results with identical ids at {knob}={low} and {knob}={high}: the engine "
              f"answered by brute force, not from its index ({why})")
    check = BruteForceCheck(ok, knob, low, high, rec_low, rec_high, identical, reason,
                            extra={"ms_low": t_low.ms, "ms_high": t_high.ms, "nq": len(exact)})
    log.info("%s brute-force check: %s", cls.name, check)
    if not ok and raise_on_failure:
        raise BackendError(f"backend '{cls.name}': {reason}")
    return check


__all__ = ["knob_check"]
