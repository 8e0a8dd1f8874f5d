"""A filter predicate bound to a dataset's attributes: its row mask over the base vectors (build
order). Engines read :class:`RowFilter`; per-query filters grouped in selectivity buckets are a
workload (:mod:`retrieval.workload`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from retrieval.errors import ConfigError, param_error, unknown_name_error
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.spec import Where


@dataclass(frozen=True, eq=False)
class RowFilter:
    """``where`` with its ``mask`` (bool (n_base,), True = the row matches)."""

    where: Where
    mask: np.ndarray

    @cached_property
    def rows(self) -> np.ndarray:
        """Matching row numbers, int64, ascending."""
        return np.flatnonzero(self.mask).astype(np.int64)

    @property
    def count(self) -> int:
        return int(self.rows.shape[0])

    @property
    def selectivity(self) -> float:
        return self.count / max(int(self.mask.shape[0]), 1)

    @cached_property
    def bitmap(self) -> np.ndarray:
        """The mask as a little-endian bitmap (uint8), as faiss ``IDSelectorBitmap`` reads it."""
        return np.packbits(self.mask, bitorder="little")


def where_mask(where: Where, attrs: Attributes, *, label: str) -> np.ndarray:
    """The rows matching ``where``; ConfigError for an unknown attribute or a type mismatch."""
    if where.attr not in attrs.names:
        raise unknown_name_error("attribute", where.attr, attrs.names, where=label)
    kind = attrs.kind(where.attr)
    if kind == "label":
        if where.range is not None:
            raise param_error(f"{where.attr}.range", "eq or in (attribute "
                              f"'{where.attr}' holds labels; range needs an integer attribute)",
                              list(where.range), where=label)
        not_str = [v for v in where.values if not isinstance(v, str)]
        if not_str:
            raise param_error(f"{where.attr}", "labels (strings) for a label attribute",
                              not_str[0], where=label)
        return attrs.labels[where.attr].mask_any(str(v) for v in where.values)
    col = attrs.ints[where.attr]
    if where.range is not None:
        lo, hi = where.range
        return (col >= lo) & (col <= hi)
    bad = [v for v in where.values if not isinstance(v, int)]
    if bad:
        raise param_error(f"{where.attr}", "integers for an integer attribute", bad[0],
                          where=label)
    return np.isin(col, np.asarray(where.values, dtype=np.int64))


def bind(where: Where, attrs: Attributes, *, label: str) -> RowFilter:
    """``where`` with its mask; a filter matching no row is a ConfigError."""
    rf = RowFilter(where, where_mask(where, attrs, label=label))
    if rf.count == 0:
        raise ConfigError(f"{label}: filter '{where.describe()}' matches no base vector (0 of "
                          f"{attrs.n}); widen it or pick another value")
    return rf
