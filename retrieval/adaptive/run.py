"""Adaptive policies run on one built index (:class:`SupportsCountedSearch`), judged on the
held-out queries against the tuned fixed ``ef_search`` (:mod:`retrieval.adaptive.policy`).

Fixed ef values are measured once on every query (tuning and held-out); the table of ada_ef is
fitted on the tuning queries, and every policy is replayed on the held-out ones. The fixed
setting at the policy's mean and p5 is then searched on the same held-out queries: the grid
first, then every integer between the last grid value that misses and the first that reaches
(bisection), beyond the grid by doubling up to ``8 x`` its largest value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.adaptive.policy import (
    COST_UNIT,
    Outcome,
    Trace,
    cheapest_fixed,
    doubling_chain,
    fit_ef_table,
    judge,
    meets,
    quality,
    run_ada_ef,
    run_early_stop,
)
from retrieval.adaptive.spec import AdaptiveSpec
from retrieval.errors import param_error
from retrieval.indexes.base import SupportsCountedSearch

log = logging.getLogger(__name__)

#: the fixed setting is searched up to this multiple of the largest ef of the spec
FIXED_REACH = 8


class Measured:
    """Traces of fixed ef values on one set of queries, measured on demand and kept."""

    def __init__(self, index: SupportsCountedSearch, queries: np.ndarray, exact: np.ndarray,
                 k: int) -> None:
        self.index, self.queries, self.exact, self.k = index, queries, exact, k
        self.traces: dict[int, Trace] = {}

    def __call__(self, ef: int) -> Trace:
        if ef not in self.traces:
            got = self.index.counted_search(self.queries, self.k, {"ef_search": int(ef)})
            self.traces[ef] = Trace.of(ef, got.result.ids, got.result.distances, self.exact,
                                       self.k, got.ndis, got.latency_ms)
        return self.traces[ef]


def tuned_fixed(held: Measured, grid: list[int], mean: float, p5: float,
                low: int) -> tuple[Any, tuple[int, int]]:
    """The cheapest fixed ef reaching ``mean`` and ``p5`` on the held-out queries (see the
    module doc for the search) and the range searched."""
    top = grid[-1] * FIXED_REACH
    steps = list(grid)
    while steps[-1] * 2 <= top:
        steps.append(steps[-1] * 2)
    lo, hi = low - 1, None
    for ef in steps:
        if meets(held(ef).recall, mean, p5):
            hi = ef
            break
        lo = ef
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(held(mid).recall, mean, p5):
            hi = mid
        else:
            lo = mid
    return cheapest_fixed(held.traces, mean, p5), (low, steps[-1])


def entry_of(out: Outcome, vs: dict[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    mean, p5 = quality(out.recall)
    return {**meta, "policy": out.policy, "cost_unit": COST_UNIT, "cost": out.cost,
            "mean": mean, "p5": p5, "p50_ms": float(np.percentile(out.ms, 50)),
            "n_queries": int(out.recall.size), "detail": out.detail, "vs_fixed": vs}


def run_adaptive(
    spec: AdaptiveSpec, index: object, queries: np.ndarray, exact: np.ndarray, k: int,
    tune_rows: np.ndarray, held_rows: np.ndarray, *, meta: Mapping[str, Any],
    target_recall: float | None = None, where: str = "spec",
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every policy of ``spec`` on ``index`` (built on the base, searched with ``queries``
    whose exact top-k ids are ``exact``): the summary entries (``meta``: label, backend, build)
    and the per-query rows (policy, query row, final ef, recall, distance computations, ms)."""
    if not isinstance(index, SupportsCountedSearch):
        why = (f"backend {meta.get('backend')} cannot count distance computations "
               f"(no SupportsCountedSearch; hnswlib has no counter): use faiss-hnsw")
        log.info("adaptive: %s", why)
        return [{**meta, "policy": p, "cost_unit": COST_UNIT, "skipped": why}
                for p in spec.policies], []
    if spec.pre_ef < k:
        raise param_error("adaptive.pre_ef", f"an integer >= k ({k})", spec.pre_ef, where=where)
    if held_rows.size == 0 or tune_rows.size == 0:
        raise param_error("tune.heldout_fraction", "in (0, 1) for adaptive policies (they are "
                          "fitted on tuning queries and judged on held-out ones)", 0.0,
                          where=where)
    grid = sorted({e for e in spec.ef_values if e >= k} | {spec.pre_ef})
    chain = doubling_chain(spec.pre_ef, grid[-1])
    everything = Measured(index, queries, exact, k)
    for ef in sorted(set(grid) | set(chain)):
        log.info("adaptive: ef_search %d on %d queries", ef, len(queries))
        everything(ef)
    tune = {ef: t.take(tune_rows) for ef, t in everything.traces.items()}
    held_all = {ef: t.take(held_rows) for ef, t in everything.traces.items()}
    held = Measured(index, queries[held_rows], exact[held_rows], k)
    held.traces.update(held_all)
    target = spec.target_mean or target_recall or 0.95
    entries, rows = [], []
    for policy in spec.policies:
        if policy == "ada_ef":
            table = fit_ef_table(tune[spec.pre_ef],
                                 {e: tune[e] for e in grid if e >= spec.pre_ef}, spec.feature,
                                 spec.bins, target, spec.target_p5)
            out = run_ada_ef(table, held_all[spec.pre_ef], held_all)
        else:
            out = run_early_stop(held_all, chain)
        mean, p5 = quality(out.recall)
        fixed, searched = tuned_fixed(held, grid, mean, p5, k)
        entries.append(entry_of(out, judge(out, fixed, searched), meta))
        rows += [{"label": meta.get("label"), "policy": out.policy, "query": int(q),
                  "ef": int(e), "recall": float(r), "ndis": int(n), "ms": float(m)}
                 for q, e, r, n, m in zip(held_rows, out.ef, out.recall, out.ndis, out.ms,
                                          strict=True)]
    return entries, rows
