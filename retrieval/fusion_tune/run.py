"""Run a fusion tuning spec end to end and write its run directory (live I/O).

1. Load the collection, keep the judged queries, split them seeded into dev / test
   (``tuning_fraction`` of them in dev).
2. Build the legs: dense (embedder + any index backend) and BM25 (pinned tokenisation); search
   every query once for ``fetch_k`` candidates; time single-query calls of each leg on a seeded
   sample of test queries (p50 / p95 ms, the dense leg's query encoding included).
3. Every candidate of the grid (:func:`retrieval.fusion_tune.fuse.grid`) is fused offline and
   evaluated on dev and test; the best on dev is chosen (ties: grid order).
4. The chosen fusion, RRF(60, equal weights) and each leg alone are judged on the test split
   from their TREC runs (real scores, ``run_depth`` docs per query, evaluated by ranx exactly as
   the files read back); paired randomisation tests: chosen vs ``rrf60`` (``p_value``) and vs
   the best single leg (the leg best on dev).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import TextCollection
from retrieval.embed import get_embedder
from retrieval.fusion_tune.fuse import (
    Candidate,
    LegTable,
    fuse,
    grid,
    leg_table,
    paired_test,
    rrf60,
    single_leg,
    top_k,
)
from retrieval.fusion_tune.spec import FusionTuneSpec
from retrieval.fusion_tune.summary import FusionTuneSummary
from retrieval.rerank.dataset import dataset_record, load_dataset, relevance_note
from retrieval.rerank.firststage import BM25Stage, Candidates, DenseStage
from retrieval.rerank.run import judged_query_ids
from retrieval.rerank.tune import split_queries
from retrieval.runs import RunDir, RunKind
from retrieval.stats.irmetrics import evaluate_rankings, relevant_qrels
from retrieval.stats.metrics import latency_summary

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]
LEGS = ("dense", "bm25")
FUSION_RULES = (
    "rrf: sum of w_leg / (k + rank), rank from 1; convex: sum of w_leg * normalised score over "
    "the leg's top depth (min-max, z-score, or dbsf = (s - (mean - 3 std)) / (6 std) clipped to "
    "[0, 1]); a leg not returning a doc adds 0; dense weight w, bm25 1 - w; ties by corpus "
    "position"
)
EVAL_POLICY = (
    "ranx ndcg@10 (gain = grade), judged queries only (grade >= 1), a judged query without "
    "results scores 0; test figures of the chosen fusion, rrf60 and the legs are computed from "
    "the TREC runs written (scores as written, 9 significant digits)"
)
LATENCY_MODE = (
    "single-query calls of each leg for fetch_k candidates on a seeded sample of test queries, "
    "ms; the dense leg includes encoding the query; the fusion itself is offline numpy"
)


@dataclass(frozen=True)
class FusionRunResult:
    summary: dict[str, Any]
    run_dir: RunDir


@dataclass(frozen=True)
class _Data:
    coll: TextCollection
    qids: list[str]
    corpus_ids: list[str]
    dev: list[str]
    test: list[str]


@dataclass(frozen=True)
class _Legs:
    cands: dict[str, Candidates]
    table: LegTable
    ms: dict[str, np.ndarray]
    embedder_id: str


def _data(spec: FusionTuneSpec) -> _Data:
    coll = load_dataset(spec.dataset, spec.split)
    qids = judged_query_ids(coll, spec.max_queries, spec.seed)
    dev, test = split_queries(qids, spec.tuning_fraction, spec.seed)
    log.info("%s: %d docs, %d judged queries (%d dev / %d test)", coll.name, len(coll.corpus),
             len(qids), len(dev), len(test))
    return _Data(coll, qids, list(coll.corpus), dev, test)


def _legs(spec: FusionTuneSpec, d: _Data) -> _Legs:
    corpus = [d.coll.corpus[i] for i in d.corpus_ids]
    qtexts = [d.coll.queries[q] for q in d.qids]
    embedder = get_embedder(spec.embedder.model)
    bm25 = BM25Stage(spec.bm25)
    bm25.build(corpus)
    dense = DenseStage(embedder, backend=spec.dense.backend, metric=spec.dense.metric,
                       build_params=spec.dense.build, search_params=spec.dense.search,
                       batch_size=spec.embedder.batch_size)
    try:
        dense.build(corpus)
        k = spec.fetch_k
        cands = {"dense": dense.search(qtexts, k), "bm25": bm25.search(qtexts, k)}
        pos = {q: i for i, q in enumerate(d.qids)}
        n = min(spec.latency.sample_queries, len(d.test))
        pick = np.sort(np.random.default_rng(spec.seed + 7).choice(len(d.test), n,
                                                                   replace=False))
        sample = [qtexts[pos[d.test[int(i)]]] for i in pick]
        ms = {"dense": dense.time_queries(sample, k)[1], "bm25": bm25.time_queries(sample, k)[1]}
    finally:
        dense.close()
    table = leg_table({leg: (c.doc_idx, c.scores) for leg, c in cands.items()})
    return _Legs(cands, table, ms, embedder.model_id)


def _rankings(docs: np.ndarray, qids: Sequence[str], corpus_ids: Sequence[str]
              ) -> dict[str, list[str]]:
    return {q: [corpus_ids[j] for j in row[row >= 0]] for q, row in zip(qids, docs)}


def _grid_scores(spec: FusionTuneSpec, d: _Data, legs: _Legs, cands: list[Candidate],
                 progress: Progress | None) -> list[dict[str, float]]:
    """Dev and test metric of every candidate (top 10 of the fused order, ranx)."""
    out: list[dict[str, float]] = []
    for i, c in enumerate(cands):
        docs, _ = top_k(legs.table, fuse(legs.table, c), 10)
        ranked = _rankings(docs, d.qids, d.corpus_ids)
        row = {split: evaluate_rankings(d.coll.qrels, ranked, [spec.metric],
                                        query_ids=ids).means[spec.metric]
               for split, ids in (("dev", d.dev), ("test", d.test))}
        out.append(row)
        if progress is not None and (i % 25 == 0 or i == len(cands) - 1):
            progress(i + 1, len(cands), "fusion candidates")
    return out


def rounded(v: float) -> float:
    """A score as the TREC file holds it (9 significant digits)."""
    return float(f"{v:.9g}")


def scored_run(docs: np.ndarray, vals: np.ndarray, qids: Sequence[str],
               corpus_ids: Sequence[str]) -> tuple[dict[str, list[str]], dict[str, list[float]]]:
    """(query id -> doc ids, query id -> scores as written) for the given queries."""
    ranked: dict[str, list[str]] = {}
    scores: dict[str, list[float]] = {}
    for q, row, sc in zip(qids, docs, vals):
        keep = row >= 0
        ranked[q] = [corpus_ids[j] for j in row[keep]]
        scores[q] = [rounded(float(s)) for s in sc[keep]]
    return ranked, scores


def ranx_per_query(qrels: dict[str, dict[str, int]], ranked: dict[str, list[str]],
                   scores: dict[str, list[float]], metric: str) -> dict[str, float]:
    """Per-query ``metric`` by ranx on the run exactly as written (a judged query absent from
    the run scores 0)."""
    from ranx import Qrels, Run, evaluate

    data = {q: dict(zip(ranked[q], scores[q])) for q in ranked if ranked[q] and q in qrels}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = Run(data)
        evaluate(Qrels(qrels), run, [metric], make_comparable=True)
        got = {str(q): float(v) for q, v in run.scores[metric].items()}
    return {q: got.get(q, 0.0) for q in qrels}


def _row_subset(qids: Sequence[str], wanted: Sequence[str]) -> np.ndarray:
    pos = {q: i for i, q in enumerate(qids)}
    return np.array([pos[q] for q in wanted], dtype=np.int64)


def run_fusion_tune(spec: FusionTuneSpec, out: Path | str | None = None, *,
                    spec_source: str = "<memory>", progress: Progress | None = None,
                    force: bool = False) -> FusionRunResult:
    """Run the experiment described by ``spec``; write and return the summary. A non-empty
    ``out`` is refused unless ``force``."""
    rd = RunDir.create(out, spec.name, force=force)
    with rd.recording():
        return _tune_into(rd, spec, spec_source, progress)


def _tune_into(rd: RunDir, spec: FusionTuneSpec, spec_source: str,
               progress: Progress | None) -> FusionRunResult:
    d = _data(spec)
    legs = _legs(spec, d)
    g = spec.fusion
    cands = grid(g.methods, g.normalisations, g.weights, g.rrf_k, g.depths, LEGS)
    t0 = time.perf_counter()
    scores = _grid_scores(spec, d, legs, cands, progress)
    log.info("%d fusion candidates evaluated in %.1f s", len(cands), time.perf_counter() - t0)
    best = max(range(len(cands)), key=lambda i: (scores[i]["dev"], -i))
    chosen = cands[best]
    judged_test = relevant_qrels(d.coll.qrels, d.test)
    rows = _row_subset(d.qids, d.test)
    test_qids = [d.qids[i] for i in rows]
    written: dict[str, tuple[dict[str, list[str]], dict[str, list[float]]]] = {}
    per_query: dict[str, dict[str, float]] = {}
    depth = max(g.depths)
    roles = {"fused": chosen, "rrf60": rrf60(LEGS, depth),
             "dense": single_leg(LEGS, "dense", spec.run_depth),
             "bm25": single_leg(LEGS, "bm25", spec.run_depth)}
    for role, cand in roles.items():
        if role in LEGS:  # the leg's own run: its real similarities
            c = legs.cands[role]
            docs, vals = c.doc_idx[rows, : spec.run_depth], c.scores[rows, : spec.run_depth]
        else:
            docs, vals = top_k(legs.table, fuse(legs.table, cand), spec.run_depth)
            docs, vals = docs[rows], vals[rows]
        written[role] = scored_run(docs, vals, test_qids, d.corpus_ids)
        per_query[role] = ranx_per_query(judged_test, *written[role], spec.metric)
    dev_means = _dev_means(spec, d, legs, roles)
    summary = _summarise(rd, spec, d, legs, cands, scores, chosen, scores[best], roles,
                         per_query, dev_means)
    _write(rd, spec, spec_source, d, legs, written, judged_test, cands, scores, per_query,
           summary)
    return FusionRunResult(summary=summary.to_json_dict(), run_dir=rd)


def _dev_means(spec: FusionTuneSpec, d: _Data, legs: _Legs,
               roles: dict[str, Candidate]) -> dict[str, float]:
    out = {}
    for role, cand in roles.items():
        docs, _ = top_k(legs.table, fuse(legs.table, cand), 10)
        out[role] = evaluate_rankings(d.coll.qrels, _rankings(docs, d.qids, d.corpus_ids),
                                      [spec.metric], query_ids=d.dev).means[spec.metric]
    return out


def _mean(pq: dict[str, float]) -> float:
    return float(np.mean(list(pq.values())))


def _summarise(rd: RunDir, spec: FusionTuneSpec, d: _Data, legs: _Legs, cands: list[Candidate],
               scores: list[dict[str, float]], chosen: Candidate, chosen_scores: dict[str, float],
               roles: dict[str, Candidate], per_query: dict[str, dict[str, float]],
               dev_means: dict[str, float]) -> FusionTuneSummary:
    order = list(per_query["fused"])
    vec = {role: np.array([pq[q] for q in order]) for role, pq in per_query.items()}
    test = {role: _mean(pq) for role, pq in per_query.items()}
    best_leg = max(LEGS, key=lambda leg: (dev_means[leg], leg == "dense"))
    vs_rrf = paired_test(vec["fused"], vec["rrf60"], spec.resamples, spec.seed)
    vs_leg = paired_test(vec["fused"], vec[best_leg], spec.resamples, spec.seed + 1)
    significant = vs_rrf.p_value < spec.alpha and vs_rrf.mean_diff > 0
    leg_sig = vs_leg.p_value < spec.alpha and vs_leg.mean_diff > 0
    verdict = (
        f"{'significant gain' if significant else 'no significant gain'} over rrf60 "
        f"({vs_rrf.mean_diff:+.4f} {spec.metric}, p {vs_rrf.p_value:.3g}); "
        f"{'significant gain' if leg_sig else 'no significant gain'} over the best single leg "
        f"{best_leg} ({vs_leg.mean_diff:+.4f}, p {vs_leg.p_value:.3g}); alpha {spec.alpha}, "
        f"{len(order)} test queries"
    )
    lat = {leg: latency_summary(ms) for leg, ms in legs.ms.items()}
    other = {"dense": "bm25", "bm25": "dense"}
    legs_out = {leg: {"test": test[leg], "dev": dev_means[leg],
                      "p50_ms": lat[leg]["p50_ms"], "p95_ms": lat[leg]["p95_ms"],
                      "latency": lat[leg],
                      "gain": test["fused"] - test[other[leg]],
                      "gain_meaning": f"chosen fusion's test {spec.metric} minus {other[leg]} "
                                      "alone: what adding this leg brings"}
                for leg in LEGS}

    def point(role: str) -> dict[str, Any]:
        c = roles[role]
        return {"method": c.method, "label": c.label, "params": c.params(),
                "dev": dev_means[role], "test": test[role]}

    return FusionTuneSummary.model_validate({
        "name": spec.name, "run_dir": str(rd.path), "dataset": d.coll.name,
        "dataset_info": dataset_record(spec.dataset, d.coll),
        "relevance": relevance_note(spec.dataset, d.coll),
        "n_docs": len(d.corpus_ids), "n_queries": len(d.qids), "n_dev": len(d.dev),
        "n_test": len(d.test), "metric": spec.metric, "alpha": spec.alpha,
        "legs": legs_out, "bm25": spec.bm25.convention(),
        "dense": {"backend": spec.dense.backend, "metric": spec.dense.metric,
                  "build": spec.dense.build, "search": spec.dense.search,
                  "embedder": legs.embedder_id},
        "candidates": [{"method": c.method, "label": c.label, "params": c.params(), **s}
                       for c, s in zip(cands, scores)],
        "baselines": {role: point(role) for role in ("rrf60", "dense", "bm25")},
        "best_single_leg": best_leg,
        "chosen": {"method": chosen.method, "label": chosen.label, "params": chosen.params(),
                   "dev": chosen_scores["dev"], "test": test["fused"],
                   "p_value": vs_rrf.p_value, "significant": significant,
                   "vs_rrf60": vs_rrf.to_dict(),
                   "vs_best_leg": {**vs_leg.to_dict(), "leg": best_leg,
                                   "significant": leg_sig}},
        "verdict": verdict,
        "trec_runs": {"dense": "dense.test.trec", "bm25": "bm25.test.trec",
                      "fused": "fused.test.trec"},
        "qrels_file": "qrels.test.trec",
        "fusion_rules": FUSION_RULES, "evaluation_policy": EVAL_POLICY,
        "latency_mode": LATENCY_MODE,
    })


def _write(rd: RunDir, spec: FusionTuneSpec, spec_source: str, d: _Data, legs: _Legs,
           written: dict[str, tuple[dict[str, list[str]], dict[str, list[float]]]],
           judged_test: dict[str, dict[str, int]], cands: list[Candidate],
           scores: list[dict[str, float]], per_query: dict[str, dict[str, float]],
           summary: FusionTuneSummary) -> None:
    from retrieval.loaders.trec import write_run

    for role in ("dense", "bm25", "fused"):
        ranked, sc = written[role]
        write_run(rd.path / f"{role}.test.trec", ranked, f"rwb-{role}", sc)
    with (rd.path / "qrels.test.trec").open("w", encoding="utf-8") as fh:
        for q, docs in judged_test.items():
            for doc, grade in docs.items():
                fh.write(f"{q} 0 {doc} {grade}\n")
    rd.write_yaml("spec.yaml", {**spec.model_dump(mode="json"), "source": spec_source})
    rd.write_manifest(spec_source=spec_source, kind=RunKind.FUSION_TUNE, seed=spec.seed,
                      dataset={"name": d.coll.name, "fingerprint": d.coll.fingerprint,
                               "source": d.coll.source, "spec": spec.dataset},
                      bm25=spec.bm25.convention(), embedder=legs.embedder_id,
                      evaluation_policy=EVAL_POLICY, latency_mode=LATENCY_MODE)
    rd.write_table("candidates.parquet", [
        {"method": c.method, "label": c.label, "rrf_k": c.rrf_k,
         "normalisation": c.normalisation, "w_dense": c.weights[0], "w_bm25": c.weights[1],
         "depth_dense": c.depths[0], "depth_bm25": c.depths[1], **s}
        for c, s in zip(cands, scores)])
    rd.write_table("per_query.parquet", [
        {"query_id": q, **{role: pq[q] for role, pq in per_query.items()}}
        for q in per_query["fused"]])
    rd.write_summary(summary)


__all__ = ["FusionRunResult", "ranx_per_query", "run_fusion_tune", "scored_run"]
