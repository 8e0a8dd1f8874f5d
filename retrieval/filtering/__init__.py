"""Filtered search: per-vector attributes, filter predicates bound to their row masks, and exact
search over a subset of rows. Per-query filters in selectivity buckets and their exact filtered
ground truth are a workload: :mod:`retrieval.workload`."""

from retrieval.filtering.attrs import Attributes, LabelColumn
from retrieval.filtering.rows import RowFilter, bind, where_mask
from retrieval.filtering.spec import STRATEGIES, FilterSpec, NamedFilter, Strategy, Where

__all__ = [
    "STRATEGIES", "Attributes", "FilterSpec", "LabelColumn", "NamedFilter", "RowFilter",
    "Strategy", "Where", "bind", "where_mask",
]
