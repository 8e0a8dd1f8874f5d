"""Search-side filtering strategies over any index (the filter never changes the build).

- ``engine``: the backend's own filtered search (:class:`~retrieval.indexes.base.SupportsFilter`);
- ``prefilter``: the matching rows are taken from an attribute index (the row list, computed
  once per filter, untimed, as a database's attribute index would be) and searched exactly
  (gather + ``faiss.knn``: timed);
- ``postfilter``: an unfiltered search for ``depth = overfetch * k`` ids (capped at the index
  size), then the filter keeps the first k matching ones. An HNSW candidate list (``ef_search``
  / ``ef``) below ``depth`` is raised to ``depth`` for these calls (it cannot return more).

:func:`strategy_call` returns ``call(queries, flt) -> SearchResult`` (ids are build rows).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval.errors import ConfigError
from retrieval.filtering.exact import subset_knn
from retrieval.filtering.rows import RowFilter
from retrieval.filtering.spec import STRATEGIES
from retrieval.indexes.base import SearchResult, SupportsFilter
from retrieval.indexes.engine import ef_knobs

Call = Callable[[np.ndarray, RowFilter], SearchResult]



def prepare_base(base: np.ndarray, metric: str) -> np.ndarray:
    """Base vectors as the exact pre-filter search reads them (normalised for cosine)."""
    from retrieval.filtering.exact import prepared

    return prepared(base, metric)


def check_strategy(index: Any, strategy: str, backend: str) -> None:
    if strategy not in STRATEGIES:
        raise ConfigError(f"field 'filters.strategies' must hold {', '.join(STRATEGIES)}; "
                          f"received {strategy!r}")
    if strategy == "engine" and not isinstance(index, SupportsFilter):
        raise ConfigError(f"backend '{backend}' has no in-engine filtering (SupportsFilter); "
                          f"use strategy prefilter or postfilter for it")


def postfilter_depth(k: int, overfetch: int, n: int) -> int:
    return max(k, min(n, k * overfetch))


def raise_ef_for(index: Any, depth: int) -> dict[str, Any] | None:
    """Raise an HNSW candidate list below ``depth`` to ``depth``; returns the params set, or
    None when nothing changed."""
    sp = getattr(index, "search_params", None)
    current = sp.model_dump() if sp is not None else {}
    knob = next((n for n in ef_knobs() if n in current), None)
    if knob is None or int(current[knob]) >= depth:
        return None
    index.set_search_params(**{knob: depth})
    return {knob: depth}


def _compact(res: SearchResult, flt: RowFilter, k: int) -> SearchResult:
    """Keep the first ``k`` ids inside ``flt`` per row (-1 / +inf padded)."""
    ids, d = res.ids, res.distances
    keep = (ids >= 0) & flt.mask[np.maximum(ids, 0)]
    out_i = np.full((ids.shape[0], k), -1, dtype=np.int64)
    out_d = np.full((ids.shape[0], k), np.inf, dtype=np.float32)
    for r in range(ids.shape[0]):
        sel = np.flatnonzero(keep[r])[:k]
        out_i[r, :sel.size], out_d[r, :sel.size] = ids[r, sel], d[r, sel]
    return SearchResult(out_i, out_d)


def strategy_call(index: Any, strategy: str, k: int, *, base: np.ndarray | None = None,
                  metric: str = "l2", overfetch: int = 1, n: int | None = None) -> Call:
    """The timed call of one strategy (``base``: :func:`prepare_base` output, for prefilter;
    ``n``: index size, for postfilter)."""
    if strategy == "engine":
        search = index.filtered_search
        return lambda q, flt: search(q, k, flt)
    if strategy == "prefilter":
        if base is None:
            raise ConfigError("strategy prefilter needs the base vectors")
        prepared = base

        def pre(q: np.ndarray, flt: RowFilter) -> SearchResult:
            qq = prepare_base(q, metric) if metric == "cosine" else q
            d, i = subset_knn(prepared, flt.rows, qq, metric, k)
            return SearchResult(i, d)

        return pre
    if strategy == "postfilter":
        depth = postfilter_depth(k, overfetch, n or k)
        plain = index.search

        def post(q: np.ndarray, flt: RowFilter) -> SearchResult:
            return _compact(plain(q, depth), flt, k)

        return post
    raise ConfigError(f"field 'filters.strategies' must hold {', '.join(STRATEGIES)}; "
                      f"received {strategy!r}")
