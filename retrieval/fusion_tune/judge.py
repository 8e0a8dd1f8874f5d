"""Choose on dev, judge on test (no I/O besides ranx): every candidate's dev / test metric, the
dev-best candidate, its TREC-ready test runs, and the paired tests against RRF(60) and the best
single leg. :mod:`retrieval.fusion_tune.run` feeds it live legs; tests feed it synthetic ones.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from retrieval.fusion_tune.fuse import (
    Candidate,
    LegTable,
    PairedTest,
    fuse,
    paired_test,
    rrf60,
    single_leg,
    top_k,
)
from retrieval.stats.irmetrics import evaluate_rankings, ranx_keys, rekey, relevant_qrels

Progress = Callable[[int, int, str], None]
#: a run as written: (query id -> doc ids best first, query id -> scores as written)
Written = tuple[dict[str, list[str]], dict[str, list[float]]]


@dataclass(frozen=True)
class Split:
    """The judged queries (table row order), their dev / test split and the corpus ids."""

    qrels: Mapping[str, Mapping[str, int]]
    qids: Sequence[str]
    corpus_ids: Sequence[str]
    dev: Sequence[str]
    test: Sequence[str]


@dataclass(frozen=True)
class Judgement:
    """What :func:`judge` found. ``scores[i]``: dev / test metric of ``cands[i]``; ``runs``:
    role (fused, rrf60, and each leg) -> the test run as written; ``per_query``: role -> test
    query -> metric (ranx on the run as written); ``dev``: role -> dev mean."""

    cands: list[Candidate]
    scores: list[dict[str, float]]
    chosen: int
    roles: dict[str, Candidate]
    runs: dict[str, Written]
    per_query: dict[str, dict[str, float]]
    dev: dict[str, float]
    best_leg: str
    vs_rrf60: PairedTest
    vs_best_leg: PairedTest
    alpha: float

    @property
    def test(self) -> dict[str, float]:
        return {role: float(np.mean(list(pq.values()))) for role, pq in self.per_query.items()}

    @property
    def significant(self) -> bool:
        """A gain over rrf60 with p < alpha."""
        return self.vs_rrf60.p_value < self.alpha and self.vs_rrf60.mean_diff > 0

    @property
    def significant_vs_leg(self) -> bool:
        return self.vs_best_leg.p_value < self.alpha and self.vs_best_leg.mean_diff > 0

    def verdict(self, metric: str) -> str:
        """One sentence: gain or "no significant gain" against each baseline."""
        a, b = self.vs_rrf60, self.vs_best_leg

        def word(sig: bool) -> str:
            return "significant gain" if sig else "no significant gain"

        return (f"{word(self.significant)} over rrf60 ({a.mean_diff:+.4f} {metric}, p "
                f"{a.p_value:.3g}); {word(self.significant_vs_leg)} over the best single leg "
                f"{self.best_leg} ({b.mean_diff:+.4f}, p {b.p_value:.3g}); alpha {self.alpha}, "
                f"{a.n_queries} test queries")


def rounded(v: float) -> float:
    """A score as a TREC file holds it (9 significant digits)."""
    return float(f"{v:.9g}")


def scored_run(docs: np.ndarray, vals: np.ndarray, qids: Sequence[str],
               corpus_ids: Sequence[str]) -> Written:
    """(query id -> doc ids, query id -> scores as written) for rows aligned with ``qids``."""
    ranked: dict[str, list[str]] = {}
    scores: dict[str, list[float]] = {}
    for q, row, sc in zip(qids, docs, vals):
        keep = row >= 0
        ranked[q] = [corpus_ids[j] for j in row[keep]]
        scores[q] = [rounded(float(s)) for s in sc[keep]]
    return ranked, scores


def ranx_per_query(qrels: Mapping[str, Mapping[str, int]], run: Written,
                   metric: str) -> dict[str, float]:
    """Per-query ``metric`` by ranx on the run exactly as written (``qrels``: the judged
    queries, grade >= 1; one absent from the run scores 0)."""
    from ranx import Qrels, Run, evaluate

    ranked, scores = run
    data = {q: dict(zip(ranked[q], scores[q])) for q in ranked if ranked[q] and q in qrels}
    keys = ranx_keys(qrels.values(), data.values())  # one id width: no numba recompiles
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = Run(rekey(data, keys))
        evaluate(Qrels(rekey(qrels, keys)), r, [metric], make_comparable=True)
        got = {str(q): float(v) for q, v in r.scores[metric].items()}
    return {q: got.get(q, 0.0) for q in qrels}


def _rankings(docs: np.ndarray, s: Split) -> dict[str, list[str]]:
    return {q: [s.corpus_ids[j] for j in row[row >= 0]] for q, row in zip(s.qids, docs)}


def _means(table: LegTable, cand: Candidate, s: Split, metric: str) -> dict[str, float]:
    docs, _ = top_k(table, fuse(table, cand), 10)
    ranked = _rankings(docs, s)
    return {split: evaluate_rankings(s.qrels, ranked, [metric], query_ids=ids).means[metric]
            for split, ids in (("dev", s.dev), ("test", s.test))}


def without_leg(table: LegTable, cand: Candidate, leg: str, s: Split,
                metric: str = "ndcg@10") -> float:
    """Test-split ``metric`` of ``cand`` with ``leg``'s weight set to 0 (the others unchanged):
    the fusion without that leg (0 when no leg is left)."""
    w = tuple(0.0 if g == leg else x for g, x in zip(cand.legs, cand.weights))
    if not any(w):
        return 0.0
    return _means(table, replace(cand, weights=w), s, metric)["test"]


def judge(table: LegTable, s: Split, cands: list[Candidate], *, metric: str = "ndcg@10",
          leg_runs: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
          run_depth: int = 100, rrf_depth: int = 100, resamples: int = 10_000,
          alpha: float = 0.05, seed: int = 0, progress: Progress | None = None) -> Judgement:
    """Evaluate every candidate on dev and test (top 10 of the fused order), choose the best on
    dev (ties: the earlier candidate), and judge it on test against RRF(60, equal weights, every
    leg at ``rrf_depth``) and the leg best on dev, by the paired randomisation test over test
    queries. ``leg_runs``: each leg's own (doc_idx, similarities) rows (default: the table's
    order of that leg alone)."""
    scores: list[dict[str, float]] = []
    for i, c in enumerate(cands):
        scores.append(_means(table, c, s, metric))
        if progress is not None:
            progress(i + 1, len(cands), "fusion candidates")
    best = max(range(len(cands)), key=lambda i: (scores[i]["dev"], -i))
    legs = table.legs
    roles = {"fused": cands[best], "rrf60": rrf60(legs, rrf_depth),
             **{leg: single_leg(legs, leg, run_depth) for leg in legs}}
    pos = {q: i for i, q in enumerate(s.qids)}
    rows = np.array([pos[q] for q in s.test], dtype=np.int64)
    judged = relevant_qrels(s.qrels, s.test)
    runs: dict[str, Written] = {}
    per_query: dict[str, dict[str, float]] = {}
    for role, cand in roles.items():
        if leg_runs is not None and role in leg_runs:
            docs, vals = (a[rows, :run_depth] for a in leg_runs[role])
        else:
            docs, vals = top_k(table, fuse(table, cand), run_depth)
            docs, vals = docs[rows], vals[rows]
        runs[role] = scored_run(docs, vals, list(s.test), s.corpus_ids)
        per_query[role] = ranx_per_query(judged, runs[role], metric)
    dev = {role: _means(table, cand, s, metric)["dev"] for role, cand in roles.items()}
    best_leg = max(legs, key=lambda leg: (dev[leg], -legs.index(leg)))
    order = list(judged)
    vec = {role: np.array([pq[q] for q in order]) for role, pq in per_query.items()}
    return Judgement(
        cands, scores, best, roles, runs, per_query, dev, best_leg,
        paired_test(vec["fused"], vec["rrf60"], resamples, seed),
        paired_test(vec["fused"], vec[best_leg], resamples, seed + 1), alpha)


def candidate_point(c: Candidate, **extra: Any) -> dict[str, Any]:
    """A candidate as the summary lists it."""
    return {"method": c.method, "label": c.label, "params": c.params(), **extra}


__all__ = ["Judgement", "Split", "Written", "candidate_point", "judge", "ranx_per_query",
           "rounded", "scored_run", "without_leg"]
