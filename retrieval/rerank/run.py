"""Run a rerank-depth sweep spec end to end and write its run directory.

1. Load the collection (SciFact test: binary qrels; Cranfield: gain = 5 - grade, all four
   grades relevant) and keep the judged queries (a seeded subset with ``max_queries``).
2. Build both first stages: BM25 (pinned convention) and dense (embedder + index adapter).
   Evaluate each alone on all queries: ``dense_ndcg@10``, ``bm25_ndcg@10``, ...
3. Score the sweep first stage's top ``max(depths)`` once with the reranker; evaluate every
   depth offline on the tuning, held-out and all queries (:mod:`retrieval.rerank.tune`).
4. Latency: single-query first-stage calls for every query; actual rerank calls at every depth on
   a seeded sample; whole stage = first stage + rerank call of the same query (ms).
5. Choose the depth on the tuning split; report it on the held-out split.
6. Router: dense top-1 similarity below a threshold -> BM25 without rerank; tuned on the tuning
   split, reported on the held-out split (:mod:`retrieval.rerank.route`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import TextCollection
from retrieval.embed import CachedEmbedder, get_embedder
from retrieval.irmetrics import evaluate_collection, relevant_qrels
from retrieval.metrics import latency_summary
from retrieval.rerank.firststage import BM25Stage, Candidates, DenseStage
from retrieval.rerank.rerankers import (
    BiEncoderReranker,
    CrossEncoderReranker,
    FlagReranker,
    PrecomputedEmbedder,
    Reranker,
)
from retrieval.rerank.route import (
    RouteInputs,
    candidate_thresholds,
    choose_threshold,
    route_mask,
    routed_rankings,
    sweep_thresholds,
)
from retrieval.rerank.spec import RerankSweepSpec
from retrieval.rerank.tune import (
    RerankScores,
    choose_depth,
    reranked_rankings,
    score_candidates,
    split_queries,
    time_rerank_calls,
)
from retrieval.store import RunDir

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]

LATENCY_MODE = (
    "measured: single-query first-stage calls (every query) + actual rerank calls at every depth "
    "on a seeded sample of queries (median of repeats, after warm-up); whole stage = first stage "
    "+ rerank call of the same query, ms; quality from one scoring pass at the largest depth"
)
EVAL_POLICY = (
    "ranx; judged queries only (grade >= 1); a judged query without results scores 0; judged doc "
    "ids missing from the corpus stay relevant (unretrievable) and are reported"
)


@dataclass(frozen=True)
class RerankRunResult:
    summary: dict[str, Any]
    run_dir: RunDir


def load_collection(spec: RerankSweepSpec) -> TextCollection:
    from retrieval.loaders.shared import load_cranfield, load_scifact

    if spec.dataset == "scifact":
        return load_scifact(spec.split)
    return load_cranfield(relevance="gain")


def relevance_note(spec: RerankSweepSpec) -> str:
    if spec.dataset == "cranfield":
        return "Cranfield grades mapped to gain = 5 - grade (4 best); grades 1-4 all relevant"
    return "SciFact BEIR qrels: grade 1 for each cited doc"


def judged_queries(coll: TextCollection, spec: RerankSweepSpec) -> list[str]:
    """Queries with a relevant judgment, in collection order (seeded subset if asked)."""
    judged = relevant_qrels(coll.qrels)
    ids = [q for q in coll.queries if q in judged and coll.queries[q].strip()]
    if spec.max_queries is not None and spec.max_queries < len(ids):
        keep = set(np.random.default_rng(spec.seed).choice(len(ids), spec.max_queries,
                                                           replace=False).tolist())
        ids = [q for i, q in enumerate(ids) if i in keep]
    return ids


def build_rerankers(
    spec: RerankSweepSpec, embedder: CachedEmbedder, corpus: Sequence[str], dense: DenseStage
) -> tuple[Reranker, Reranker, dict[str, Any]]:
    """(reranker for the quality pass, reranker for timing, description).

    Cross-encoders: the same object. Bi-encoder: the quality pass looks up corpus passage
    vectors already computed with the same model (identical scores, no re-encoding); the timing
    reranker encodes query and passages for real on every call.
    """
    r = spec.reranker
    if r.kind == "cross-encoder":
        ce = CrossEncoderReranker(r.model or "", batch_size=r.batch_size, max_length=r.max_length)
        return ce, ce, {"kind": r.kind, "name": ce.name}
    if r.kind == "flag":
        fr = FlagReranker(r.model or "", batch_size=r.batch_size, max_length=r.max_length or 512)
        return fr, fr, {"kind": r.kind, "name": fr.name}
    emb = get_embedder(r.model) if r.model else embedder
    if emb.model_id == dense.embedder.model_id and dense.corpus_vectors is not None:
        positions = dense.corpus_positions
        assert positions is not None
        vectors = dense.corpus_vectors
        texts = [corpus[i] for i in positions]
    else:
        texts = [t for t in corpus if t.strip()]
        vectors = emb.embed(texts, batch_size=spec.embedder.batch_size)
    known = dict(zip(texts, vectors))
    quality = BiEncoderReranker(PrecomputedEmbedder(emb.inner, known), batch_size=r.batch_size)
    timing = BiEncoderReranker(emb.inner, batch_size=r.batch_size)
    info = {
        "kind": r.kind,
        "name": timing.name,
        "quality_pass": "corpus passage vectors looked up (same model), query encoded",
        "timing": "query and passages encoded on every call",
    }
    return quality, timing, info


def _metrics_row(scores: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in scores.items()}


def run_rerank_sweep(
    spec: RerankSweepSpec,
    out: Path | str | None = None,
    *,
    spec_source: str = "<memory>",
    progress: Progress | None = None,
) -> RerankRunResult:
    """Run the sweep described by ``spec``; write and return the summary."""
    rd = RunDir.create(out, spec.name)
    coll = load_collection(spec)
    qids = judged_queries(coll, spec)
    qtexts = [coll.queries[q] for q in qids]
    corpus_ids = list(coll.corpus)
    corpus = [coll.corpus[d] for d in corpus_ids]
    tuning, heldout = split_queries(qids, spec.tuning_fraction, spec.seed)
    splits = {"tuning": tuning, "heldout": heldout, "all": qids}
    metrics = spec.metrics
    k_eval = spec.recall_k
    log.info("%s: %d docs, %d judged queries (%d tuning / %d held-out)", coll.name, len(corpus),
             len(qids), len(tuning), len(heldout))

    # -- first stages -------------------------------------------------------------------------
    embedder = get_embedder(spec.embedder.model)
    bm25 = BM25Stage(spec.bm25)
    bm25.build(corpus)
    dense = DenseStage(
        embedder,
        backend=spec.dense.backend,
        metric=spec.dense.metric,
        build_params=spec.dense.build,
        search_params=spec.dense.search,
        batch_size=spec.embedder.batch_size,
    )
    dense.build(corpus)
    fetch = spec.fetch_k
    cands: dict[str, Candidates] = {"bm25": bm25.search(qtexts, fetch),
                                    "dense": dense.search(qtexts, fetch)}
    first_stage: dict[str, dict[str, float]] = {}
    unknown: dict[str, list[str]] = {}
    policy: dict[str, Any] = {}
    for name, c in cands.items():
        s = evaluate_collection(coll, c.rankings(qids, corpus_ids, k_eval), metrics,
                                query_ids=qids)
        first_stage[name] = _metrics_row(s.means)
        unknown, policy = s.unknown_docs, s.policy()
    _, bm25_ms = bm25.time_queries(qtexts, fetch)
    _, dense_ms = dense.time_queries(qtexts, fetch)
    stage_ms = {"bm25": bm25_ms, "dense": dense_ms}
    first_latency = {name: latency_summary(ms) for name, ms in stage_ms.items()}

    # -- one scoring pass at the largest depth ---------------------------------------------------
    quality_rr, timing_rr, rr_info = build_rerankers(spec, embedder, corpus, dense)
    main = cands[spec.first_stage]
    rscores = score_candidates(quality_rr, qtexts, corpus, main, spec.max_depth,
                               progress=progress)
    depths = sorted(spec.depths)
    curve_rows: list[dict[str, Any]] = []
    per_query_rows: list[dict[str, Any]] = []
    quality: dict[str, dict[int, dict[str, float]]] = {s: {} for s in splits}
    for d in depths:
        rankings = reranked_rankings(main, rscores, d, qids, corpus_ids, k=k_eval)
        for split, ids in splits.items():
            s = evaluate_collection(coll, rankings, metrics, query_ids=ids)
            quality[split][d] = _metrics_row(s.means)
            curve_rows.append({"depth": d, "split": split, "n_queries": s.n_queries,
                               **quality[split][d]})
            if split == "all":
                for q in ids:
                    per_query_rows.append({"depth": d, "query_id": q,
                                           **{m: s.per_query[m][q] for m in metrics}})

    # -- latency: actual calls on a seeded sample -------------------------------------------------
    n_sample = min(spec.latency.sample_queries, len(qids))
    sample = np.sort(np.random.default_rng(spec.seed + 1).choice(len(qids), n_sample,
                                                                  replace=False))
    passages = [[corpus[j] for j in main.row(int(i), spec.max_depth)] for i in sample]
    rr_ms = time_rerank_calls(timing_rr, [qtexts[int(i)] for i in sample], passages, depths,
                              warmup=spec.latency.warmup, repeats=spec.latency.repeats,
                              progress=progress)
    fs_ms = stage_ms[spec.first_stage][sample]
    latency: dict[int, dict[str, float]] = {}
    latency_rows: list[dict[str, Any]] = []
    for d in depths:
        total = fs_ms + rr_ms[d]
        summ = latency_summary(total)
        rr_summ = latency_summary(rr_ms[d])
        latency[d] = {**summ, "rerank_p50_ms": rr_summ["p50_ms"],
                      "rerank_p95_ms": rr_summ["p95_ms"]}
        for j, i in enumerate(sample):
            latency_rows.append({"depth": d, "query_id": qids[int(i)],
                                 "first_stage_ms": float(fs_ms[j]),
                                 "rerank_ms": float(rr_ms[d][j]), "stage_ms": float(total[j])})

    choice = choose_depth({d: quality["tuning"][d][spec.metric] for d in depths}, spec.tolerance)
    curve = [
        {
            "depth": d,
            "tuning": quality["tuning"][d],
            "heldout": quality["heldout"][d],
            "all": quality["all"][d],
            "latency": latency[d],
        }
        for d in depths
    ]

    # -- router ---------------------------------------------------------------------------------
    router_summary: dict[str, Any] | None = None
    router_rows: list[dict[str, Any]] = []
    if spec.router.enabled:
        router_summary, router_rows = _tune_router(
            spec, coll, qids, qtexts, corpus, corpus_ids, cands, rscores, quality_rr,
            stage_ms, rr_ms, choice.depth, splits, progress,
        )

    summary: dict[str, Any] = {
        "name": spec.name,
        "run_dir": str(rd.path),
        "dataset": coll.name,
        "dataset_fingerprint": coll.fingerprint,
        "relevance": relevance_note(spec),
        "n_docs": len(corpus),
        "n_queries": len(qids),
        "n_tuning": len(tuning),
        "n_heldout": len(heldout),
        "dense_ndcg@10": first_stage["dense"]["ndcg@10"],
        "bm25_ndcg@10": first_stage["bm25"]["ndcg@10"],
        "first_stage": {
            name: {"all": first_stage[name], "latency": first_latency[name]} for name in cands
        },
        "bm25": spec.bm25.convention(),
        "dense": {"backend": spec.dense.backend, "metric": spec.dense.metric,
                  "build": spec.dense.build, "search": spec.dense.search,
                  "embedder": embedder.model_id},
        "sweep_first_stage": spec.first_stage,
        "reranker": rr_info,
        "selection_metric": spec.metric,
        "tolerance": spec.tolerance,
        "chosen_depth": choice.depth,
        "no_rerank_wins": choice.no_rerank_wins,
        "best_depth": choice.best_depth,
        "chosen": {
            "depth": choice.depth,
            "tuning": quality["tuning"][choice.depth],
            "heldout": quality["heldout"][choice.depth],
            "latency": latency[choice.depth],
        },
        "curve": curve,
        "latency_mode": LATENCY_MODE,
        "latency_sample_queries": int(n_sample),
        "evaluation_policy": EVAL_POLICY,
        "evaluation_counts": policy,
        "unknown_judged_doc_ids": unknown,
        "router": router_summary,
    }
    rd.write_yaml("spec.yaml", {**spec.model_dump(mode="json"), "source": spec_source})
    rd.write_manifest(
        spec_source=spec_source,
        kind="rerank-sweep",
        seed=spec.seed,
        dataset={"name": coll.name, "fingerprint": coll.fingerprint, "source": coll.source},
        bm25=spec.bm25.convention(),
        embedder=embedder.model_id,
        reranker=rr_info,
        latency_mode=LATENCY_MODE,
        evaluation_policy=EVAL_POLICY,
    )
    rd.write_table("curve.parquet", curve_rows)
    rd.write_table("per_query.parquet", per_query_rows)
    rd.write_table("latency.parquet", latency_rows)
    if router_rows:
        rd.write_table("router.parquet", router_rows)
    rd.write_json("summary.json", summary)
    return RerankRunResult(summary=summary, run_dir=rd)


def _tune_router(
    spec: RerankSweepSpec,
    coll: TextCollection,
    qids: list[str],
    qtexts: list[str],
    corpus: list[str],
    corpus_ids: list[str],
    cands: dict[str, Candidates],
    rscores: RerankScores,
    quality_rr: Reranker,
    stage_ms: dict[str, np.ndarray],
    rr_ms: dict[int, np.ndarray],
    chosen_depth: int,
    splits: dict[str, list[str]],
    progress: Progress | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    depth = spec.router.rerank_depth if spec.router.rerank_depth is not None else chosen_depth
    dense_c = cands["dense"]
    k_eval = spec.recall_k
    if depth > 0:
        scores = (
            rscores if spec.first_stage == "dense"
            else score_candidates(quality_rr, qtexts, corpus, dense_c, depth, progress=progress)
        )
        primary = reranked_rankings(dense_c, scores, depth, qids, corpus_ids, k=k_eval)
    else:
        primary = dense_c.rankings(qids, corpus_ids, k_eval)
    fallback = cands["bm25"].rankings(qids, corpus_ids, k_eval)
    m = spec.metric
    pq = evaluate_collection(coll, primary, [m], query_ids=qids).per_query[m]
    fq = evaluate_collection(coll, fallback, [m], query_ids=qids).per_query[m]
    # rerank cost on the primary path: median of the actual calls at that depth (sample)
    rerank_cost = float(np.median(rr_ms[depth])) if depth > 0 else 0.0
    dense_ms = stage_ms["dense"]
    inputs = RouteInputs(
        query_ids=tuple(qids),
        top1=dense_c.top1(),
        primary_quality=np.array([pq[q] for q in qids]),
        fallback_quality=np.array([fq[q] for q in qids]),
        primary_ms=dense_ms + rerank_cost,
        fallback_ms=dense_ms + stage_ms["bm25"],
    )
    tune_in = inputs.subset(splits["tuning"])
    held_in = inputs.subset(splits["heldout"])
    thresholds = spec.router.thresholds or candidate_thresholds(tune_in.top1,
                                                                spec.router.quantiles)
    points = sweep_thresholds(tune_in, thresholds)
    chosen = choose_threshold(points, spec.router.tolerance)
    held = {name: sweep_thresholds(held_in, [t])[0]
            for name, t in (("chosen", chosen.threshold), ("never", -math.inf),
                            ("always", math.inf))}
    mask = route_mask(inputs.top1, chosen.threshold)
    routed = routed_rankings(qids, primary, fallback, mask)
    held_all = evaluate_collection(coll, routed, spec.metrics, query_ids=splits["heldout"])
    rows = [{"split": "tuning", **p.as_row()} for p in points]
    rows += [{"split": "heldout", "role": name, **p.as_row()} for name, p in held.items()]
    summary = {
        "rule": (
            "route to BM25 (no rerank) when dense top-1 similarity < threshold; chosen on the "
            "tuning split: lowest mean latency among thresholds within tolerance of the best "
            f"{m}"
        ),
        "threshold": chosen.as_row()["threshold"],
        "threshold_unit": _sim_unit(spec.dense.metric),
        "policy": chosen.as_row()["policy"],
        "primary_rerank_depth": depth,
        "primary_latency_mode": (
            "dense single-query ms (measured, every query) + rerank cost at the depth (median "
            "of the actual calls on the latency sample)"
        ),
        "fallback_latency_mode": "dense + BM25 single-query ms (measured, every query)",
        "tolerance": spec.router.tolerance,
        "tuning": chosen.as_row(),
        "heldout": {name: p.as_row() for name, p in held.items()},
        "heldout_metrics": _metrics_row(held_all.means),
    }
    return summary, rows


def _sim_unit(metric: str) -> str:
    return {
        "cosine": "cosine similarity (-1..1; = 1 - rwb cosine distance)",
        "ip": "inner product",
        "l2": "negative squared L2 distance",
    }[metric]


__all__ = ["RerankRunResult", "load_collection", "run_rerank_sweep"]
