"""In-engine filtered search for the in-process backends (not a backend: no ``register`` here).

:class:`InProcessFilter` gives an :class:`~retrieval.indexes.inprocess.InProcessIndex`
backend the :class:`~retrieval.indexes.base.SupportsFilter` methods; the backend implements
``_filtered(x, k, flt)`` with its library's own filter (each engine folder holds its own:
a filter function, a selector over the row bitmap). Attributes are not stored: the row mask carries
the filter. Filters are over row numbers, so an index built with custom ids is refused.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from retrieval.errors import ConfigError, DataError
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter
from retrieval.indexes.base import SearchResult


class InProcessFilter:
    """Mixin (put it before the backend's base class)."""

    _n: int
    _ids: np.ndarray | None
    _checked_k: int
    dim: int
    name: ClassVar[str]

    def attach_attributes(self, attrs: Attributes) -> None:
        """In-process libraries filter on the row mask: nothing to store."""

    def filtered_search(self, queries: np.ndarray, k: int, flt: RowFilter) -> SearchResult:
        """Top-``k`` among the rows ``flt`` matches (ids -1 padded when fewer are found)."""
        x = queries
        if not (k == self._checked_k and type(x) is np.ndarray and x.dtype == np.float32
                and x.ndim == 2 and x.shape[1] == self.dim and x.flags.c_contiguous):
            x = self._validated_queries(queries, k)  # type: ignore[attr-defined]
        if flt.mask.shape[0] != self._n:
            raise DataError(f"backend '{self.name}': filter mask has {flt.mask.shape[0]} rows "
                            f"for an index of {self._n} vectors")
        if self._ids is not None:
            raise ConfigError(f"backend '{self.name}': filtered search needs an index built "
                              f"without custom ids (filters are over row numbers)")
        d, i = self._filtered(x, k, flt)
        return SearchResult(ids=i, distances=d)

    def _filtered(self, x: np.ndarray, k: int, flt: RowFilter) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


def pad(d: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Widen (nq, m) results to (nq, k) with +inf / -1."""
    if i.shape[1] >= k:
        return d, i
    nq = i.shape[0]
    ids = np.full((nq, k), -1, dtype=np.int64)
    dist = np.full((nq, k), np.inf, dtype=np.float32)
    ids[:, :i.shape[1]], dist[:, :i.shape[1]] = i, d
    return dist, ids
