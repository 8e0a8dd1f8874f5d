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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import TextCollection
from retrieval.embed import get_embedder
from retrieval.errors import DataError
from retrieval.fusion_tune.fuse import Candidate, LegTable, fuse, leg_table, top_k
from retrieval.fusion_tune.judge import (
    Judgement,
    Split,
    candidate_point,
    judge,
    ranx_per_query,
    scored_run,
    without_leg,
)
from retrieval.fusion_tune.sparse import SparseStage
from retrieval.fusion_tune.spec import FusionTuneSpec, grid_of, legs_of
from retrieval.fusion_tune.summary import FusionTuneSummary
from retrieval.rerank.dataset import dataset_record, load_dataset, relevance_note
from retrieval.rerank.firststage import BM25Stage, Candidates, DenseStage
from retrieval.rerank.run import judged_query_ids
from retrieval.rerank.tune import split_queries
from retrieval.runs import RunDir
from retrieval.stats.irmetrics import relevant_qrels
from retrieval.stats.metrics import latency_summary

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]
FUSION_RULES = (
    "rrf: sum of w_leg / (k + rank), rank from 1; convex: sum of w_leg * normalised score over "
    "the leg's top depth (min-max, z-score with the population std, or dbsf = (s - (mean - 3 "
    "std)) / (6 std) clipped to [0, 1] with the sample std, as Qdrant); a leg not returning a doc "
    "adds 0; dense weight w, bm25 1 - w (three legs: weight triples normalised to sum 1); ties "
    "by corpus position"
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


def _legs(spec: FusionTuneSpec, d: _Data, *, timed: bool = True) -> _Legs:
    corpus = [d.coll.corpus[i] for i in d.corpus_ids]
    qtexts = [d.coll.queries[q] for q in d.qids]
    embedder = get_embedder(spec.embedder.model)
    bm25 = BM25Stage(spec.bm25)
    bm25.build(corpus)
    dense = DenseStage(embedder, backend=spec.dense.backend, metric=spec.dense.metric,
                       build_params=spec.dense.build, search_params=spec.dense.search,
                       batch_size=spec.embedder.batch_size)
    sparse = SparseStage(spec.sparse.engine, bm25.index) if spec.sparse is not None else None
    try:
        dense.build(corpus)
        k = spec.fetch_k
        cands = {"dense": dense.search(qtexts, k), "bm25": bm25.search(qtexts, k)}
        if sparse is not None:
            sparse.build()
            cands["sparse"] = sparse.search(qtexts, k)
        ms: dict[str, np.ndarray] = {}
        pos = {q: i for i, q in enumerate(d.qids)}
        n = 0 if not timed else min(spec.latency.sample_queries, len(d.test))
        pick = np.sort(np.random.default_rng(spec.seed + 7).choice(len(d.test), n,
                                                                   replace=False))
        sample = [qtexts[pos[d.test[int(i)]]] for i in pick]
        if sample:
            ms = {"dense": dense.time_queries(sample, k)[1],
                  "bm25": bm25.time_queries(sample, k)[1]}
            if sparse is not None:
                ms["sparse"] = sparse.time_queries(sample, k)
    finally:
        dense.close()
        if sparse is not None:
            sparse.close()
    table = leg_table({leg: (c.doc_idx, c.scores) for leg, c in cands.items()})
    return _Legs(cands, table, ms, embedder.model_id)


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
    cands = grid_of(spec)
    t0 = time.perf_counter()
    split = Split(d.coll.qrels, d.qids, d.corpus_ids, d.dev, d.test)
    j = judge(legs.table, split, cands, metric=spec.metric,
              leg_runs={leg: (c.doc_idx, c.scores) for leg, c in legs.cands.items()},
              run_depth=spec.run_depth, rrf_depth=max(g.depths), resamples=spec.resamples,
              alpha=spec.alpha, seed=spec.seed, progress=progress)
    log.info("%d fusion candidates judged in %.1f s", len(cands), time.perf_counter() - t0)
    summary = _summarise(rd, spec, d, legs, j, split)
    _write(rd, spec, spec_source, d, legs, j, summary)
    return FusionRunResult(summary=summary.to_json_dict(), run_dir=rd)


def _gains(spec: FusionTuneSpec, legs: _Legs, j: Judgement,
           split: Split) -> dict[str, tuple[float, str]]:
    """Each leg's (gain, meaning). Two legs: the chosen fusion's test metric minus the other leg
    alone (as the TREC files score it). Three: minus the chosen fusion without this leg (its
    weight 0; top 10 of the fused order)."""
    test, names, m = j.test, legs_of(spec), spec.metric
    if len(names) == 2:
        other = {names[0]: names[1], names[1]: names[0]}
        return {leg: (test["fused"] - test[other[leg]], f"chosen fusion's test {m} minus "
                      f"{other[leg]} alone: what adding this leg brings") for leg in names}
    chosen = j.cands[j.chosen]
    return {leg: (j.scores[j.chosen]["test"] - without_leg(legs.table, chosen, leg, split, m),
                  f"chosen fusion's test {m} minus the same fusion without {leg} (its weight "
                  "0): what adding this leg brings") for leg in names}


def _summarise(rd: RunDir, spec: FusionTuneSpec, d: _Data, legs: _Legs,
               j: Judgement, split: Split) -> FusionTuneSummary:
    test = j.test
    lat = {leg: latency_summary(ms) for leg, ms in legs.ms.items()}
    names = legs_of(spec)
    gains = _gains(spec, legs, j, split)
    legs_out = {leg: {"test": test[leg], "dev": j.dev[leg],
                      "p50_ms": lat[leg]["p50_ms"], "p95_ms": lat[leg]["p95_ms"],
                      "latency": lat[leg], "gain": gains[leg][0], "gain_meaning": gains[leg][1]}
                for leg in names}
    extra: dict[str, Any] = {}
    if spec.sparse is not None:
        extra["sparse"] = {"engine": spec.sparse.engine, "weights": "bm25s per-term BM25 "
                           "weights of the bm25 leg's convention; query: token counts"}
    chosen = j.cands[j.chosen]
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
        "candidates": [candidate_point(c, **sc) for c, sc in zip(j.cands, j.scores)],
        "baselines": {role: candidate_point(j.roles[role], dev=j.dev[role], test=test[role])
                      for role in ("rrf60", *names)},
        "best_single_leg": j.best_leg,
        "chosen": {**candidate_point(chosen, dev=j.scores[j.chosen]["dev"], test=test["fused"]),
                   "p_value": j.vs_rrf60.p_value, "significant": j.significant,
                   "vs_rrf60": j.vs_rrf60.to_dict(),
                   "vs_best_leg": {**j.vs_best_leg.to_dict(), "leg": j.best_leg,
                                   "significant": j.significant_vs_leg}},
        "verdict": j.verdict(spec.metric),
        "trec_runs": {**{leg: f"{leg}.test.trec" for leg in names},
                      "fused": "fused.test.trec"},
        "qrels_file": "qrels.test.trec",
        "fusion_rules": FUSION_RULES, "evaluation_policy": EVAL_POLICY,
        "latency_mode": LATENCY_MODE, **extra,
    })


def _write(rd: RunDir, spec: FusionTuneSpec, spec_source: str, d: _Data, legs: _Legs,
           j: Judgement, summary: FusionTuneSummary) -> None:
    from retrieval.loaders.trec import write_run

    names = legs_of(spec)
    for role in (*names, "fused"):
        ranked, sc = j.runs[role]
        write_run(rd.path / f"{role}.test.trec", ranked, f"rwb-{role}", sc)
    with (rd.path / "qrels.test.trec").open("w", encoding="utf-8") as fh:
        for q, docs in relevant_qrels(d.coll.qrels, d.test).items():
            for doc, grade in docs.items():
                fh.write(f"{q} 0 {doc} {grade}\n")
    dumped = spec.model_dump(mode="json")
    if dumped.get("sparse") is None:
        dumped.pop("sparse", None)  # a two-leg spec reads as before
    rd.write_yaml("spec.yaml", {**dumped, "source": spec_source})
    rd.write_manifest(spec_source=spec_source, kind=FusionTuneSummary.KIND, seed=spec.seed,
                      dataset={"name": d.coll.name, "fingerprint": d.coll.fingerprint,
                               "source": d.coll.source, "spec": spec.dataset},
                      bm25=spec.bm25.convention(), embedder=legs.embedder_id,
                      evaluation_policy=EVAL_POLICY, latency_mode=LATENCY_MODE)
    rd.write_table("candidates.parquet", [
        {"method": c.method, "label": c.label, "rrf_k": c.rrf_k,
         "normalisation": c.normalisation, **{f"w_{g}": w for g, w in zip(names, c.weights)},
         **{f"depth_{g}": x for g, x in zip(names, c.depths)}, **sc}
        for c, sc in zip(j.cands, j.scores)])
    rd.write_table("per_query.parquet", [
        {"query_id": q, **{role: pq[q] for role, pq in j.per_query.items()}}
        for q in j.per_query["fused"]])
    rd.write_summary(summary)


def remeasure(spec_doc: Mapping[str, Any], cand: Candidate, *, fingerprint: str | None,
              where: str) -> tuple[float, int]:
    """(test-split metric of ``cand``, test queries): both legs rebuilt from the recorded spec,
    the test split fused and evaluated as :func:`run_fusion_tune` wrote its run (``run_depth``
    docs, scores as written). DataError when the collection's fingerprint changed."""
    from retrieval.fusion_tune.spec import parse_fusion_spec

    spec = parse_fusion_spec(dict(spec_doc), source=f"{where} (source.spec)")
    d = _data(spec)
    if fingerprint and fingerprint != d.coll.fingerprint:
        raise DataError(f"{where}: dataset changed: fingerprint {fingerprint} recorded, "
                        f"{d.coll.fingerprint} now ({d.coll.name})")
    legs = _legs(spec, d, timed=False)
    pos = {q: i for i, q in enumerate(d.qids)}
    rows = np.array([pos[q] for q in d.test], dtype=np.int64)
    docs, vals = top_k(legs.table, fuse(legs.table, cand), spec.run_depth)
    run = scored_run(docs[rows], vals[rows], d.test, d.corpus_ids)
    pq = ranx_per_query(relevant_qrels(d.coll.qrels, d.test), run, spec.metric)
    return float(np.mean(list(pq.values()))), len(pq)


__all__ = ["FusionRunResult", "remeasure", "run_fusion_tune"]
