"""A workload as data: what is asked of an index, and the exact answers it is scored against.

A :class:`Workload` holds the queries (their positions in the dataset's query order), optional
per-query filters grouped in selectivity buckets (each with its exact filtered ground truth) and
the filtering strategies to measure, and an optional runbook of write steps (inserts and
deletes, as big-ann-benchmarks' streaming runbooks describe them). The evaluation loop and the
sweep worker read the workload; what they run is declared by :attr:`Workload.kind`, never
guessed from the keys of a summary.

Write steps come from a runbook (:mod:`retrieval.workload.runbook`: YAML -> resolved steps over
the caller's ids); the churn bench (:mod:`retrieval.churn`) runs them. The evaluation loop and the
sweep do not (:func:`check_runnable` refuses a workload that has some there, in one line).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from retrieval.errors import ConfigError
from retrieval.workload.buckets import Bucket
from retrieval.workload.truth import FilteredGT

#: what a run measured: unfiltered search, or per-query filtered search by selectivity bucket
WorkloadKind = Literal["plain", "filtered"]
WORKLOAD_KINDS: tuple[str, ...] = ("plain", "filtered")
StepOp = Literal["insert", "delete", "replace", "search", "maintain"]


@dataclass(frozen=True, eq=False)
class Step:
    """One resolved runbook step over the caller's ``ids`` (int64, never row numbers):

    - ``insert``: the base rows ``rows`` under ``ids`` (same length);
    - ``delete``: the live ``ids`` (``rows``: the base rows they held, for the record);
    - ``replace``: the live ``ids`` get the vectors of the base rows ``rows`` (delete + insert
      under the same ids: a document updated in place);
    - ``search``: the workload's queries, scored against the exact top-k of the live set then
      (``control``: also build a fresh index on the live set, see :mod:`retrieval.churn`);
    - ``maintain``: the engine's clean-up (vacuum / compact / optimize).

    ``index`` is the step's position in the runbook (0-based) and ``label`` how it reads in
    messages and tables (``"3 replace 10000:11000"``)."""

    op: StepOp
    ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    index: int = 0
    label: str = ""
    control: bool | None = None


@dataclass(frozen=True, eq=False)
class Workload:
    """The queries asked of an index (``n_queries`` of the dataset's, in its order), optional
    filter ``buckets`` with their exact filtered ground truth (``truth[bucket.name]``, top-k by
    row id) and the filtering ``strategies`` measured on them, and optional write ``steps``."""

    n_queries: int
    k: int
    buckets: tuple[Bucket, ...] = ()
    truth: Mapping[str, FilteredGT] = field(default_factory=dict)
    strategies: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()

    @property
    def kind(self) -> WorkloadKind:
        return "filtered" if self.buckets else "plain"

    def bucket(self, name: str) -> Bucket:
        for b in self.buckets:
            if b.name == name:
                return b
        raise KeyError(f"no bucket '{name}' in this workload; allowed: "
                       f"{', '.join(b.name for b in self.buckets)}")


def filtered_workload(buckets: Sequence[Bucket], strategies: Sequence[str], *,
                      base: np.ndarray, queries: np.ndarray, metric: str, k: int,
                      fingerprint: str | None = None) -> Workload:
    """The filtered workload of ``buckets``, with each bucket's exact filtered ground truth
    (computed once, cached by ``fingerprint`` + filter digest + k)."""
    from retrieval.workload.truth import filtered_ground_truth

    truth = {b.name: filtered_ground_truth(base, queries, metric, b, k, fingerprint=fingerprint)
             for b in buckets}
    return Workload(int(queries.shape[0]), k, tuple(buckets), truth, tuple(strategies))


def check_runnable(workload: Workload, *, where: str) -> None:
    """Refuse, in one line, what no loop runs yet: a workload with write steps."""
    if workload.steps:
        ops = sorted({s.op for s in workload.steps})
        raise ConfigError(
            f"{where}: the workload has {len(workload.steps)} write step(s) ({', '.join(ops)}); "
            f"running insert/delete runbooks is not supported yet: drop the steps (allowed: "
            f"a workload of queries, optionally with filters)")
