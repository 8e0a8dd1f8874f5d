"""What is asked of an index: queries, optional per-query filters (selectivity buckets), optional
write steps (a runbook), and the exact ground truth of each (see :mod:`retrieval.workload.truth`
for the fewer-than-k rule of filtered recall)."""

from retrieval.workload.buckets import Bucket, bind_workload
from retrieval.workload.core import (
    WORKLOAD_KINDS,
    Step,
    Workload,
    WorkloadKind,
    check_runnable,
    filtered_workload,
)
from retrieval.workload.truth import (
    FilteredGT,
    filtered_ground_truth,
    filtered_recall,
    filtered_recall_tie,
)

__all__ = [
    "WORKLOAD_KINDS", "Bucket", "FilteredGT", "Step", "Workload", "WorkloadKind",
    "bind_workload", "check_runnable", "filtered_ground_truth", "filtered_recall",
    "filtered_recall_tie", "filtered_workload",
]
