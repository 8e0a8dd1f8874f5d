"""Filtered search: per-vector attributes, filter predicates and workloads, exact filtered
ground truth (see :mod:`retrieval.filtering.gt` for the fewer-than-k rule)."""

from retrieval.filtering.attrs import Attributes, LabelColumn
from retrieval.filtering.gt import FilteredGT, filtered_ground_truth, filtered_recall
from retrieval.filtering.spec import STRATEGIES, FilterSpec, NamedFilter, Strategy, Where
from retrieval.filtering.workload import Bucket, RowFilter, bind, bind_workload, where_mask

__all__ = [
    "STRATEGIES", "Attributes", "Bucket", "FilterSpec", "FilteredGT", "LabelColumn",
    "NamedFilter", "RowFilter", "Strategy", "Where", "bind", "bind_workload",
    "filtered_ground_truth", "filtered_recall", "where_mask",
]
