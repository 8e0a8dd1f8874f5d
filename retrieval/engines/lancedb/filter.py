"""LanceDB filtered search (:class:`~retrieval.indexes.base.SupportsFilter`): attributes as
columns of the table, filters as LanceDB ``where`` clauses applied before the vector search
(``prefilter=True``: the index is searched among the rows that pass, so a filter never returns
a row that fails it and never returns fewer than k while k rows pass).

Not a backend module (the backends are in :mod:`retrieval.engines.lancedb.index`, which mixes
:class:`LanceFilter` in). An integer attribute ``x`` becomes an int64 column ``a_x``
(``a_x BETWEEN lo AND hi`` / ``a_x IN (..)``); a label attribute with one label a row (a
tenant, a category) a string column ``a_x`` (``a_x IN ('..')``), with a ``BITMAP`` scalar index
for the tenant attribute (``Attributes.tenant``). A label attribute with several labels on a row
is refused (one line).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np

from retrieval.errors import ConfigError
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter
from retrieval.filtering.spec import Where
from retrieval.indexes.base import SearchResult

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9_]")


def column_name(attr: str) -> str:
    """The table column of attribute ``attr`` (letters, digits and _ only)."""
    return "a_" + _SAFE.sub("_", attr)


def sql_string(value: str) -> str:
    """``value`` as a single-quoted SQL string literal (quotes doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def where_clause(where: Where, attrs: Attributes) -> str:
    """The LanceDB ``where`` clause of ``where``."""
    col = column_name(where.attr)
    if attrs.kind(where.attr) == "label":
        return f"{col} IN ({', '.join(sql_string(str(v)) for v in where.values)})"
    if where.range is not None:
        return f"{col} BETWEEN {int(where.range[0])} AND {int(where.range[1])}"
    return f"{col} IN ({', '.join(str(int(v)) for v in where.values)})"


class LanceFilter:
    """Mixin of :class:`retrieval.engines.lancedb.index.LanceIndex` (SupportsFilter)."""

    _attrs: Attributes | None = None
    _table: Any

    def attach_attributes(self, attrs: Attributes) -> None:
        """Store ``attrs`` as columns at the next build (labels: one a row)."""
        for name, col in attrs.labels.items():
            counts = np.diff(col.indptr)
            if counts.size and not bool((counts == 1).all()):
                raise ConfigError(f"backend '{getattr(self, 'name', 'lancedb')}': label "
                                  f"attribute '{name}' must hold exactly one label a row for "
                                  f"LanceDB's where; received rows with {int(counts.min())} "
                                  f"to {int(counts.max())}")
        self._attrs = attrs

    def _attr_columns(self, rows: slice) -> dict[str, Any]:
        """The attribute columns (pyarrow arrays) of build rows ``rows``."""
        import pyarrow as pa

        a = self._attrs
        if a is None:
            return {}
        out: dict[str, Any] = {}
        for name, ints in a.ints.items():
            out[column_name(name)] = pa.array(np.asarray(ints)[rows], type=pa.int64())
        for name, col in a.labels.items():
            vocab = np.asarray(col.vocab, dtype=object)
            out[column_name(name)] = pa.array(vocab[np.asarray(col.codes)[rows]].tolist(),
                                              type=pa.string())
        return out

    def _attr_indexes(self, table: Any) -> list[str]:
        """A BITMAP scalar index on the tenant column (what LanceDB advises for a filter of
        low cardinality); the columns indexed."""
        a = self._attrs
        if a is None or a.tenant is None or a.tenant not in a.labels:
            return []
        from lancedb.index import Bitmap

        col = column_name(a.tenant)
        try:
            table.create_index(col, config=Bitmap())
        except Exception as exc:  # an older LanceDB: the filter still works, by a scan
            log.info("LanceDB scalar index on %s not built: %s", col, exc)
            return []
        return [col]

    def filtered_search(self, queries: np.ndarray, k: int, flt: RowFilter) -> SearchResult:
        """Top-k of each query among the rows that pass ``flt.where`` (LanceDB prefilter)."""
        if self._attrs is None:
            raise ConfigError(f"backend '{getattr(self, 'name', 'lancedb')}': filtered search "
                              f"needs attach_attributes() before build()")
        clause = where_clause(flt.where, self._attrs)
        x = np.ascontiguousarray(queries, dtype=np.float32)
        ids = np.full((x.shape[0], k), -1, dtype=np.int64)
        dist = np.full((x.shape[0], k), np.inf, dtype=np.float32)
        for i in range(x.shape[0]):
            query = self._query(self._table, x[i], k).where(  # type: ignore[attr-defined]
                clause, prefilter=True)
            d, r = self._rows(query.to_arrow(), 1, k)  # type: ignore[attr-defined]
            dist[i], ids[i] = d[0], r[0]
        return SearchResult(ids, dist)


__all__ = ["LanceFilter", "column_name", "sql_string", "where_clause"]
