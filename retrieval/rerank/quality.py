"""Rerank depth as the quality target's second knob (issue 32 item 2): with ``target:
{ndcg_non_inferior: M}`` in a rerank spec whose first stage is an ANN dense index, the cheapest
(ANN knob, rerank depth) pair whose nDCG@10 against the qrels is non-inferior to the reference
by M, reported beside the recall-0.95 choice.

- **Reference**: exact search (brute force on the same corpus vectors) reranked at the largest
  depth of ``depths`` (the best a pipeline with this reranker can do).
- **The test**: :func:`retrieval.stats.noninferiority.non_inferiority`, the sweeps' own: over
  the judged tuning queries, ``d_q = metric(pair) - metric(reference)``, paired one-sided
  t-test, non-inferior when the lower ``1 - alpha`` bound of mean(d) is > -M.
- **The search**: for every depth, the smallest knob value in range that passes, by the sweeps'
  target search (:func:`retrieval.stats.monotone.solve`, galloping + bisection; like the sweeps
  it assumes quality does not fall as the knob grows, every probe is listed). A depth whose most
  accurate knob fails is infeasible (``knob_value`` null).
- **The cost** (``cost_ms``, the one the choice minimises): the pair's estimated single-query
  stage time in ms = the dense search's p50 at the knob (query vectors given: encoding costs
  every pair the same and is left out) + the reranker's measured p50 call time at the depth
  (the sweep's latency pass; 0 at depth 0). Ties: the smaller depth, then the smaller knob.
  Beside it, not minimised: ``candidates_scored`` (= the depth, per query) and
  ``distance_computations`` (mean per query where the engine counts them, else null).
- **The recall choice** beside it: the smallest knob whose mean recall@10 against exact search
  is >= 0.95 on the same queries (same search), paired with the sweep's chosen depth (the
  tolerance rule); ``agree`` when both knob and depth are the same.

Reranker scores are pointwise, so each (query, passage) pair is scored once and reused across
knob values (``passages_scored`` counts the model's work).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from retrieval.data import TextCollection
from retrieval.indexes import create_index
from retrieval.indexes.base import SupportsDistanceCount
from retrieval.indexes.engine import backend_for
from retrieval.rerank.firststage import Candidates, DenseStage
from retrieval.rerank.rerankers import Reranker, score_passages
from retrieval.rerank.spec import RerankSweepSpec, ann_knob
from retrieval.rerank.tune import rerank_order
from retrieval.stats.irmetrics import evaluate_collection
from retrieval.stats.monotone import solve
from retrieval.stats.noninferiority import NonInferiority, non_inferiority
from retrieval.timing import time_each

log = logging.getLogger(__name__)

#: the recall target of the recall choice reported beside the quality pair (recall@10 by id)
RECALL_TARGET = 0.95
RECALL_K = 10
TEST = ("paired one-sided t-test over the judged tuning queries: H0 mean(metric pair - metric "
        "reference) <= -margin; non-inferior when the lower 1-alpha confidence bound of the mean "
        "difference is > -margin")
COST_UNIT = ("cost_ms: estimated single-query stage time, ms = dense search p50 at the knob "
             "(query vectors given) + the reranker's p50 call time at the depth (0 at depth 0); "
             "the choice minimises it (ties: smaller depth, then smaller knob)")


@dataclass
class PairSearch:
    """The judged tuning queries, their vectors, and what was measured (cached by knob value
    and by (query, passage))."""

    spec: RerankSweepSpec
    coll: TextCollection
    qids: list[str]
    qtexts: list[str]
    corpus: Sequence[str]
    corpus_ids: Sequence[str]
    dense: DenseStage
    reranker: Reranker
    qvecs: np.ndarray = field(init=False)
    k: int = field(init=False)
    _scores: list[dict[int, float]] = field(init=False)
    _ann: dict[int, Candidates] = field(default_factory=dict, init=False)
    _metric: dict[tuple[int | None, int], np.ndarray] = field(default_factory=dict, init=False)
    passages_scored: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.qvecs = np.ascontiguousarray(self.dense.embedder.embed(
            self.qtexts, batch_size=self.spec.embedder.batch_size), dtype=np.float32)
        assert self.spec.target is not None
        self.k = self.spec.fetch_k  # >= the target's depth and 10 (checked with the spec)
        self._scores = [{} for _ in self.qids]

    def exact(self) -> Candidates:
        """Exact top k (brute force on the dense stage's own corpus vectors)."""
        vectors, positions = self.dense.corpus_vectors, self.dense.corpus_positions
        assert vectors is not None and positions is not None, "dense.build() first"
        index = create_index(backend_for("exact"), int(vectors.shape[1]), self.dense.metric, {})
        try:
            index.build(vectors, positions)
            res = index.search(self.qvecs, self.k)
        finally:
            index.close()
        return _candidates(res.ids, res.distances, self.dense)

    def ann(self, knob: str, v: int) -> Candidates:
        if v not in self._ann:
            self._set(knob, v)
            self._ann[v] = self.dense.search_vectors(self.qvecs, self.k)
        return self._ann[v]

    def _set(self, knob: str, v: int) -> None:
        self.dense.index.set_search_params(**{**self.spec.dense.search, knob: v})

    def restore(self) -> None:
        """The dense stage's own search params again (the sweep's)."""
        if self.spec.dense.search:
            self.dense.index.set_search_params(**self.spec.dense.search)

    def per_query(self, cands: Candidates, depth: int, key: int | None) -> np.ndarray:
        """The target metric of each query after reranking the top ``depth`` of ``cands``."""
        if (key, depth) in self._metric:
            return self._metric[key, depth]
        assert self.spec.target is not None
        metric = self.spec.target.metric
        ranked: dict[str, list[str]] = {}
        for i, qid in enumerate(self.qids):
            row = cands.row(i)
            head = row[:depth]
            cache = self._scores[i]
            todo = [int(j) for j in head if int(j) not in cache]
            if todo:
                got = score_passages(self.reranker, self.qtexts[i],
                                     [self.corpus[j] for j in todo])
                cache.update(zip(todo, (float(s) for s in got), strict=True))
                self.passages_scored += len(todo)
            scores = np.array([cache[int(j)] for j in head], dtype=np.float64)
            order = rerank_order(row, scores, depth)[: self.spec.target.depth]
            ranked[qid] = [self.corpus_ids[int(j)] for j in order]
        s = evaluate_collection(self.coll, ranked, [metric], query_ids=self.qids)
        out = np.array([s.per_query[metric][q] for q in self.qids], dtype=np.float64)
        self._metric[key, depth] = out
        return out

    def recall(self, cands: Candidates, exact: Candidates) -> float:
        """Mean recall@10 of ``cands`` against exact search's top 10 (by id)."""
        got = [len(set(cands.row(i, RECALL_K).tolist()) & set(exact.row(i, RECALL_K).tolist()))
               / max(1, len(exact.row(i, RECALL_K))) for i in range(len(self.qids))]
        return float(np.mean(got))

    def costs(self, knob: str, v: int) -> tuple[float, float | None]:
        """(dense single-query p50 ms at ``v``, mean distance computations per query or None)."""
        self._set(knob, v)
        rows = [self.qvecs[i: i + 1] for i in range(len(self.qids))]
        _, ms = time_each(lambda x: self.dense.search_vectors(x, self.k), rows)
        index = self.dense.index
        ndis = (float(index.count_distances(self.qvecs, self.k)) / len(self.qids)
                if isinstance(index, SupportsDistanceCount) else None)
        return float(np.percentile(ms, 50)), ndis


def _holds(judge: Callable[[int, int], NonInferiority], depth: int, v: int) -> bool:
    return judge(v, depth).holds


def _candidates(ids: np.ndarray, distances: np.ndarray, dense: DenseStage) -> Candidates:
    from retrieval.rerank.firststage import distances_to_similarity

    return Candidates(doc_idx=np.asarray(ids, dtype=np.int64),
                      scores=distances_to_similarity(distances, dense.metric))


def pair_search(spec: RerankSweepSpec, coll: TextCollection, qids: list[str],
                corpus: Sequence[str], corpus_ids: Sequence[str], dense: DenseStage,
                reranker: Reranker, latency: Mapping[int, Mapping[str, float]],
                chosen_depth: int) -> dict[str, Any]:
    """The summary's ``quality`` section (plain JSON) over the judged tuning queries ``qids``;
    ``latency``: the sweep's per-depth latency (``rerank_p50_ms``: the reranker's p50 call
    time at each depth, ms)."""
    target = spec.target
    assert target is not None
    qtexts = [coll.queries[q] for q in qids]
    rerank_p50_ms = {int(d): float(v.get("rerank_p50_ms") or 0.0) for d, v in latency.items()}
    knob, low, high = ann_knob(spec, spec.name)
    ps = PairSearch(spec, coll, qids, qtexts, corpus, corpus_ids, dense, reranker)
    try:
        exact = ps.exact()
        reference = ps.per_query(exact, spec.max_depth, None)
        tests: dict[tuple[int, int], NonInferiority] = {}

        def judge(v: int, d: int) -> NonInferiority:
            if (v, d) not in tests:
                tests[v, d] = non_inferiority(ps.per_query(ps.ann(knob, v), d, v) - reference,
                                              target.margin, target.alpha)
            return tests[v, d]

        timed: dict[int, tuple[float, float | None]] = {}

        def pair(v: int | None, d: int, probes: Sequence[int] = ()) -> dict[str, Any]:
            row: dict[str, Any] = {"depth": d, "knob_value": v, "candidates_scored": d,
                                   "rerank_p50_ms": rerank_p50_ms.get(d, 0.0) if d else 0.0}
            if probes:
                row["probes"] = list(probes)
            if v is None:  # infeasible: the test at the most accurate knob says by how much
                test = judge(high, d)
                return {**row, "non_inferior": False, "at_most_accurate": {
                    "knob_value": high, **test.to_dict(),
                    "value": float(ps.per_query(ps.ann(knob, high), d, high).mean())}}
            if v not in timed:
                timed[v] = ps.costs(knob, v)
            p50, ndis = timed[v]
            return {**row, "search": {**spec.dense.search, knob: v},
                    "value": float(ps.per_query(ps.ann(knob, v), d, v).mean()),
                    **judge(v, d).to_dict(), "recall": ps.recall(ps.ann(knob, v), exact),
                    "dense_p50_ms": p50, "distance_computations": ndis,
                    "cost_ms": p50 + row["rerank_p50_ms"]}

        frontier = []
        for d in sorted(spec.depths):
            found = solve(low, high, partial(_holds, judge, d))
            frontier.append(pair(found.value, d, found.probes))
        feasible = [r for r in frontier if r["knob_value"] is not None]
        best = min(feasible, key=lambda r: (r["cost_ms"], r["depth"], r["knob_value"]),
                   default=None)
        by_recall = solve(low, high, lambda v: ps.recall(ps.ann(knob, v), exact) >= RECALL_TARGET)
        v_r = by_recall.value
        recall_pair = pair(v_r, chosen_depth) if v_r is not None else None
    finally:
        ps.restore()
    v_q = None if best is None else best["knob_value"]
    d_q = None if best is None else best["depth"]
    log.info("rerank quality target: pair (%s=%s, depth %s) by %s; recall-%.2f pair (%s, %s)",
             knob, v_q, d_q, target.key, RECALL_TARGET, v_r, chosen_depth)
    return {
        "metric": target.metric, "margin": target.margin, "alpha": target.alpha, "test": TEST,
        "reference": f"exact search (brute force on the same vectors) reranked at depth "
                     f"{spec.max_depth}",
        "cost_unit": COST_UNIT, "knob": knob, "range": [low, high],
        "recall_target": RECALL_TARGET,
        "knob_recall": v_r, "depth_recall": chosen_depth,
        "knob_quality": v_q, "depth_quality": d_q,
        "agree": v_r is not None and v_r == v_q and chosen_depth == d_q,
        "exact": float(reference.mean()), "n_queries": len(qids),
        "recall": recall_pair, "quality": best, "by_depth": frontier,
        "passages_scored": ps.passages_scored,
    }


__all__ = ["COST_UNIT", "RECALL_TARGET", "PairSearch", "pair_search"]
