"""Measuring one config for the tuner, on top of :class:`retrieval.evaluation.Evaluator`.

Three kinds of measurement, all on a built index (never rebuilt for a search param):

- **full** (grid points, and the config a target search chose): the spec's modes on the tuning
  queries: single-query latency percentiles (ms) and batch QPS with ``batch_repeats``;
- **probe** (target search steps): one batch pass over the tuning queries, without warm-up:
  recall (what the search decides on; warm-up cannot change it) and the QPS of that pass
  (indicative; the chosen config is then timed in full);
- **held-out**: the chosen config, one batch pass over the held-out queries (recall only); it
  passes when its mean recall is >= the target.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from retrieval.evaluation import BuiltIndex, Evaluator, Measurement, Mode
from retrieval.indexes.entry import SearchConfig
from retrieval.metrics import latency_summary
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import QuerySplit, lower_bound
from retrieval.tune.results import HeldOut, PointResult

#: slack when comparing a bound with the target (float sums of exact fractions)
EPS = 1e-9

#: a search config: as written (validated by the evaluator) or already validated
Search = Mapping[str, Any] | SearchConfig


@contextmanager
def _one_pass(ev: Evaluator) -> Iterator[None]:
    """One batch pass without warm-up (for recall; its QPS is indicative only)."""
    saved = ev.batch_repeats, ev.warmup
    ev.batch_repeats, ev.warmup = 1, 0
    try:
        yield
    finally:
        ev.batch_repeats, ev.warmup = saved


def _memory_fields(built: BuiltIndex | None) -> dict[str, Any]:
    rep = None if built is None else built.memory_report
    if rep is None:
        return {}
    return {"bytes_per_vector": rep.get("bytes_per_vector"), "memory": dict(rep)}


@dataclass
class Measurer:
    ev: Evaluator
    split: QuerySplit
    modes: Sequence[Mode]
    target: float | None
    conf: ConfidenceSpec
    seed: int

    def meets(self, lb: float) -> bool | None:
        return None if self.target is None else bool(lb >= self.target - EPS)

    def _result(self, ms: list[Measurement], search: Search,
                built: BuiltIndex | None = None) -> PointResult:
        single = next((m for m in ms if m.mode == "single"), None)
        batch = next((m for m in ms if m.mode == "batch"), None)
        ref = batch or single
        assert ref is not None
        lb = lower_bound(ref.per_query_recall, ref.k, self.conf, self.seed)
        lat = latency_summary(single.latency_ms) if single is not None else {}
        s = ref.summary()
        return PointResult(
            search=dict(search.given if isinstance(search, SearchConfig) else search),
            recall=ref.recall,
            recall_lb=lb,
            recall_tie=float(ref.per_query_recall_tie.mean()),
            recall_p5=float(s["recall_p5"]),
            n_queries=ref.n_queries,
            p50_ms=lat.get("p50_ms"),
            p95_ms=lat.get("p95_ms"),
            p99_ms=lat.get("p99_ms"),
            qps=ref.qps,
            build_s=ref.build_s,
            memory_bytes=ref.memory_bytes,
            meets=self.meets(lb),
            **_memory_fields(built),
        )

    def full(self, built: BuiltIndex, search: Search) -> PointResult:
        ms = self.ev.measure(
            built, search, modes=self.modes, query_idx=self.split.tune, query_set="tune"
        )
        return self._result(ms, search, built)

    def probe(self, built: BuiltIndex, search: Search) -> PointResult:
        with _one_pass(self.ev):
            ms = self.ev.measure(
                built, search, modes=["batch"], query_idx=self.split.tune, query_set="tune"
            )
        return self._result(ms, search, built)

    def heldout(self, built: BuiltIndex, search: Search) -> HeldOut | None:
        if self.split.heldout.size == 0:
            return None
        with _one_pass(self.ev):
            (m,) = self.ev.measure(
                built, search, modes=["batch"], query_idx=self.split.heldout,
                query_set="heldout",
            )
        lb = lower_bound(m.per_query_recall, m.k, self.conf, self.seed)
        # an independent estimate of the same mean: it passes when it is >= the target (the
        # tuning bound makes that likely at the confidence level); its own bound is reported
        return HeldOut(m.recall, lb, m.n_queries, self.meets(m.recall))
