"""Qdrant filtered search: attributes as point payload, filters as Qdrant ``Filter`` objects.

Not a backend module (the backend is :mod:`retrieval.engines.qdrant.index`, which mixes
:class:`QdrantFilter` in). An integer attribute ``x`` becomes the payload field ``a_x`` (an
integer) with an integer payload index (``lookup`` and ``range``); a label attribute the field
``a_x`` holding the row's list of labels, with a keyword payload index. The indexes are created
before the points are written, so Qdrant's optimizer builds its filterable-HNSW extra links
(per indexed value block, ``payload_m`` = ``m``) with the graph, and its query planner can
estimate a filter's cardinality.

Predicates translate to one condition in ``Filter(must=[...])``: ``eq`` ->
``FieldCondition(match=MatchValue(v))``, ``in`` -> ``MatchAny(any=[..])`` (a label row matches
when any of its labels is one of them), ``range`` -> ``RangeFloat(gte=lo, lte=hi)`` (Qdrant's
range is a float range, so integer bounds must lie within +-2**53).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np

from retrieval.errors import ConfigError, DataError, param_error, unknown_name_error
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter
from retrieval.filtering.spec import Where
from retrieval.indexes.base import SearchResult

_SAFE = re.compile(r"[^A-Za-z0-9_]")
#: integers a float range compares exactly
EXACT_INT = 2**53


def field_name(attr: str) -> str:
    """The payload field of attribute ``attr`` (letters, digits and _ only: no JSON path)."""
    return "a_" + _SAFE.sub("_", attr)


def create_payload_indexes(shard: Any, attrs: Attributes) -> None:
    """An integer (lookup + range) or keyword payload index per attribute, on ``shard``; the
    tenant attribute's keyword index is marked ``is_tenant`` (Qdrant stores each tenant's points
    together)."""
    import qdrant_edge as q

    for name in attrs.ints:
        shard.update(q.UpdateOperation.create_field_index(
            field_name(name), q.IntegerIndexParams(lookup=True, range=True)))
    for name in attrs.labels:
        params = (q.KeywordIndexParams(is_tenant=True) if name == attrs.tenant
                  else q.KeywordIndexParams())
        shard.update(q.UpdateOperation.create_field_index(field_name(name), params))


def payloads(attrs: Attributes, start: int, stop: int) -> list[dict[str, Any]]:
    """The payload of build rows ``start..stop-1``."""
    ints = [(field_name(k), v[start:stop].tolist()) for k, v in attrs.ints.items()]
    labels = [(field_name(k), c) for k, c in attrs.labels.items()]
    out = []
    for j in range(stop - start):
        p: dict[str, Any] = {f: vals[j] for f, vals in ints}
        for f, col in labels:
            p[f] = col.row(start + j)
        out.append(p)
    return out


def condition(where: Where, attrs: Attributes, *, label: str = "backend 'qdrant'") -> Any:
    """The ``FieldCondition`` of ``where`` (ConfigError for an unknown attribute or a range on
    a label)."""
    import qdrant_edge as q

    if where.attr not in attrs.names:
        raise unknown_name_error("attribute", where.attr, attrs.names, where=label)
    key = field_name(where.attr)
    if where.range is not None:
        lo, hi = int(where.range[0]), int(where.range[1])
        if attrs.kind(where.attr) == "label":
            raise param_error(f"{where.attr}.range", f"eq or in (attribute '{where.attr}' holds "
                              f"labels; range needs an integer attribute)", [lo, hi], where=label)
        if max(abs(lo), abs(hi)) > EXACT_INT:
            raise param_error(f"{where.attr}.range", "bounds within +-2**53 (Qdrant compares "
                              "ranges as floats)", [lo, hi], where=label)
        return q.FieldCondition(key=key, range=q.RangeFloat(gte=float(lo), lte=float(hi)))
    values: list[Any] = ([str(v) for v in where.values] if attrs.kind(where.attr) == "label"
                         else [int(v) for v in where.values])
    if len(values) == 1:
        return q.FieldCondition(key=key, match=q.MatchValue(values[0]))
    return q.FieldCondition(key=key, match=q.MatchAny(any=values))


def qdrant_filter(where: Where, attrs: Attributes) -> Any:
    """``Filter(must=[condition(where)])``."""
    import qdrant_edge as q

    return q.Filter(must=[condition(where, attrs)])


class QdrantFilter:
    """Mixin for :class:`retrieval.engines.qdrant.index.QdrantIndex` (SupportsFilter)."""

    name: ClassVar[str]
    dim: int
    _n: int
    _ids: np.ndarray | None
    _checked_k: int
    _shard: Any
    #: attributes for the next build / those written as payload by the current build
    _attrs: Attributes | None = None
    _payload_attrs: Attributes | None = None
    _filters: dict[str, Any]

    def attach_attributes(self, attrs: Attributes) -> None:
        """Write ``attrs`` as payload (with payload indexes) at the next build."""
        self._attrs = attrs

    def _filtered_params(self) -> Any:
        raise NotImplementedError

    def filtered_search(self, queries: np.ndarray, k: int, flt: RowFilter) -> SearchResult:
        """Top-``k`` with ``QueryRequest(filter=Filter(must=[...]))`` (Qdrant filters during the
        graph walk, or scans the payload index's matches when it estimates them few); ids
        -1 padded when fewer are found."""
        x = queries
        if not (k == self._checked_k and type(x) is np.ndarray and x.dtype == np.float32
                and x.ndim == 2 and x.shape[1] == self.dim and x.shape[0] > 0
                and x.flags.c_contiguous):
            x = self._validated_queries(queries, k)  # type: ignore[attr-defined]
        attrs = self._payload_attrs
        if attrs is None:
            raise ConfigError(f"backend '{self.name}': filtered search needs "
                              f"attach_attributes() before build()")
        if flt.mask.shape[0] != self._n:
            raise DataError(f"backend '{self.name}': filter mask has {flt.mask.shape[0]} rows "
                            f"for an index of {self._n} vectors")
        key = flt.where.describe()
        f = self._filters.get(key)
        if f is None:
            f = self._filters[key] = qdrant_filter(flt.where, attrs)
        d, i = self._query(x, k, f, self._filtered_params())  # type: ignore[attr-defined]
        if self._ids is not None:
            i = np.where(i >= 0, self._ids[np.maximum(i, 0)], -1)
        return SearchResult(ids=i, distances=d)


__all__ = ["QdrantFilter", "condition", "create_payload_indexes", "field_name", "payloads",
           "qdrant_filter"]
