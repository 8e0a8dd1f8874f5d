"""Milvus filtered search: attributes as scalar fields, filters as Milvus boolean expressions.

Not a backend module (the backend is :mod:`retrieval.engines.milvus.index`, which mixes
:class:`MilvusFilter` in). An integer attribute ``x`` becomes an INT64 field ``a_x``; a label
attribute an ARRAY of VARCHAR; the tenant attribute (``Attributes.tenant``, one label a row) a
VARCHAR field marked ``is_partition_key`` (Milvus hashes tenants into its partitions, 16 in
Milvus Lite 3.2, and a tenant filter searches only its partition), filtered by ``a_x in [..]``.
Predicates translate to ``a_x >= lo and a_x <= hi``,
``a_x in [..]`` and ``ARRAY_CONTAINS_ANY(a_x, [..])``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from retrieval.engines.milvus.common import WHERE, to_result
from retrieval.errors import ConfigError
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter
from retrieval.filtering.spec import Where
from retrieval.indexes.base import SearchResult

_SAFE = re.compile(r"[^A-Za-z0-9_]")


def field_name(attr: str) -> str:
    """The Milvus field of attribute ``attr`` (letters, digits and _ only)."""
    return "a_" + _SAFE.sub("_", attr)


#: the escapes both Milvus's expression grammar and Milvus Lite's parser read back
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TO_ESCAPE = re.compile(r'[\\"\n\r\t]')


def string_literal(value: str) -> str:
    """``value`` as a double-quoted Milvus string literal: backslash, quote, newline, CR and tab
    escaped, every other character (non-ASCII included) written as itself, in UTF-8 (Milvus
    Lite knows no ``\\u`` escape, so JSON's ASCII escapes are refused there)."""
    return '"' + _TO_ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], value) + '"'


def partition_key(attrs: Attributes) -> str | None:
    """The tenant attribute stored as Milvus's partition key: ``attrs.tenant`` when every row
    holds exactly one label of it (else None: an ARRAY field like any label)."""
    name = attrs.tenant
    if name is None or name not in attrs.labels:
        return None
    counts = np.diff(attrs.labels[name].indptr)
    return name if counts.size and bool((counts == 1).all()) else None


def expression(where: Where, attrs: Attributes) -> str:
    """The Milvus boolean expression of ``where`` (attribute kinds from ``attrs``)."""
    f = field_name(where.attr)
    if where.attr == partition_key(attrs):  # a VARCHAR partition key: one label a row
        values = ", ".join(string_literal(str(v)) for v in where.values)
        return f"{f} in [{values}]"
    if attrs.kind(where.attr) == "label":
        values = ", ".join(string_literal(str(v)) for v in where.values)
        return f"ARRAY_CONTAINS_ANY({f}, [{values}])"
    if where.range is not None:
        return f"{f} >= {int(where.range[0])} and {f} <= {int(where.range[1])}"
    return f"{f} in [{', '.join(str(int(v)) for v in where.values)}]"


class MilvusFilter:
    """Mixin for :class:`retrieval.engines.milvus.index.MilvusIndex` (SupportsFilter)."""

    _attrs: Attributes | None = None
    collection: str
    query_batch: int
    metric: Any
    _client: Any

    def attach_attributes(self, attrs: Attributes) -> None:
        """Store ``attrs`` as scalar fields at the next build."""
        self._attrs = attrs

    def _add_attribute_fields(self, schema: Any) -> Any:
        from pymilvus import DataType

        a = self._attrs
        if a is None:
            return schema
        for name in a.ints:
            schema.add_field(field_name(name), DataType.INT64)
        key = partition_key(a)
        for name, col in a.labels.items():
            per_row = int(np.diff(col.indptr).max(initial=1))
            longest = max((len(v.encode()) for v in col.vocab), default=1)
            if name == key:  # Milvus hashes the tenants into its partitions
                schema.add_field(field_name(name), DataType.VARCHAR, max_length=max(longest, 1),
                                 is_partition_key=True)
                continue
            schema.add_field(field_name(name), DataType.ARRAY, element_type=DataType.VARCHAR,
                             max_capacity=max(per_row, 1), max_length=max(longest, 1))
        return schema

    def _attribute_rows(self, rows: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
        """``rows`` (inserted from build row ``start`` on) with their attribute values."""
        a = self._attrs
        if a is None:
            return rows
        key = partition_key(a)
        for j, row in enumerate(rows, start):
            for name, ints in a.ints.items():
                row[field_name(name)] = int(ints[j])
            for name, col in a.labels.items():
                labels = col.row(j)
                row[field_name(name)] = labels[0] if name == key else labels
        return rows

    def filtered_search(self, queries: np.ndarray, k: int, flt: RowFilter) -> SearchResult:
        """Top-k with ``filter=<expression of flt.where>`` (Milvus filters during the search)."""
        if self._attrs is None:
            raise ConfigError(f"{WHERE}: filtered search needs attach_attributes() before "
                              f"build()")
        q, params = self._prepare(queries, k)  # type: ignore[attr-defined]
        expr = expression(flt.where, self._attrs)
        parts = []
        for s in range(0, len(q), self.query_batch):
            kwargs = self._search_kwargs(q[s:s + self.query_batch], k, params)  # type: ignore[attr-defined]
            parts.append(self._call("search", self._client.search, filter=expr, **kwargs))  # type: ignore[attr-defined]
        return to_result(parts, len(q), k, self.metric)
