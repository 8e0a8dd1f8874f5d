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
from retrieval.rerank.adaptive import router_vs_fixed_depth
from retrieval.rerank.dataset import dataset_path, dataset_record, load_dataset, relevance_note
from retrieval.rerank.firststage import BM25Stage, Candidates, DenseStage
from retrieval.rerank.quality import pair_search
from retrieval.rerank.rerankers import Reranker, make_rerankers
from retrieval.rerank.route import (
    RouteInputs,
    candidate_thresholds,
    choose_threshold,
    route_mask,
    routed_rankings,
    sweep_thresholds,
)
from retrieval.rerank.runfile import run_file_candidates
from retrieval.rerank.spec import RerankSweepSpec
from retrieval.rerank.summary import (  # noqa: F401  (re-exported: the old import path)
    DepthPoint,
    RerankerInfo,
    RerankSweepSummary,
    RouterSummary,
)
from retrieval.rerank.tune import (
    DepthChoice,
    RerankScores,
    choose_depth,
    reranked_rankings,
    score_candidates,
    split_queries,
    time_rerank_calls,
)
from retrieval.runs import RunDir
from retrieval.stats.irmetrics import evaluate_collection, relevant_qrels
from retrieval.stats.metrics import latency_summary
from retrieval.stats.sampling import seeded_subset

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
    """The collection the spec's ``dataset`` names (:mod:`retrieval.rerank.dataset`)."""
    return load_dataset(spec.dataset, spec.split)


def judged_query_ids(coll: TextCollection, max_queries: int | None, seed: int) -> list[str]:
    """Queries with a relevant judgment and text, in collection order (a seeded subset of
    ``max_queries`` when asked)."""
    judged = relevant_qrels(coll.qrels)
    ids = [q for q in coll.queries if q in judged and coll.queries[q].strip()]
    if max_queries is not None and max_queries < len(ids):
        keep = set(seeded_subset(len(ids), max_queries, seed).tolist())
        ids = [q for i, q in enumerate(ids) if i in keep]
    return ids


def judged_queries(coll: TextCollection, spec: RerankSweepSpec) -> list[str]:
    """:func:`judged_query_ids` with the spec's ``max_queries`` and ``seed``."""
    return judged_query_ids(coll, spec.max_queries, spec.seed)


def build_rerankers(
    spec: RerankSweepSpec, embedder: CachedEmbedder, corpus: Sequence[str], dense: DenseStage,
    reranker: Any = None, queries: Sequence[str] = (),
) -> tuple[Reranker, Reranker, dict[str, Any]]:
    """(reranker for the quality pass, reranker for timing, description).

    Cross-encoders: the same object. Bi-encoder: the quality pass looks up corpus passage
    vectors already computed with the same model (identical scores, no re-encoding), and the
    vectors of ``queries`` (the dense stage embedded them in one batch: read back from the
    embedding cache, not encoded again one by one in the quality pass and the router); the
    timing reranker encodes query and passages for real on every call.
    """
    r = spec.reranker
    if r.is_custom or reranker is not None:
        from retrieval.rerank.custom import make_custom_reranker

        custom, info = make_custom_reranker(r, reranker)
        return custom, custom, info
    known: dict[str, np.ndarray] = {}
    if r.kind not in ("cross-encoder", "flag"):
        emb = get_embedder(r.model) if r.model else embedder
        if emb.model_id == dense.embedder.model_id and dense.corpus_vectors is not None:
            positions = dense.corpus_positions
            assert positions is not None
            vectors = dense.corpus_vectors
            texts = [corpus[i] for i in positions]
        else:
            texts = [t for t in corpus if t.strip()]
            vectors = emb.embed(texts, batch_size=spec.embedder.batch_size)
        known, embedder = dict(zip(texts, vectors)), emb
        if queries and emb.model_id == dense.embedder.model_id:
            qs = list(queries)
            known.update(zip(qs, emb.embed(qs, batch_size=spec.embedder.batch_size)))
    note = ("corpus passage and query vectors looked up (same model)" if queries
            else "corpus passage vectors looked up (same model), query encoded")
    return make_rerankers(
        r.kind, r.model, batch_size=r.batch_size, max_length=r.max_length, embedder=embedder,
        known=known, quality_note=note,
    )


def _metrics_row(scores: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in scores.items()}


@dataclass(frozen=True)
class _Queries:
    """The collection, its judged queries and their split, the corpus in id order."""

    coll: TextCollection
    qids: list[str]
    qtexts: list[str]
    corpus_ids: list[str]
    corpus: list[str]
    splits: dict[str, list[str]]  # tuning, heldout, all


@dataclass(frozen=True)
class _FirstStages:
    embedder: CachedEmbedder
    dense: DenseStage
    cands: dict[str, Candidates]  # bm25, dense: every judged query's top fetch_k
    quality: dict[str, dict[str, float]]  # metric means over all judged queries
    stage_ms: dict[str, np.ndarray]  # single-query ms per judged query
    unknown: dict[str, list[str]]
    policy: dict[str, Any]
    run_info: dict[str, Any] | None = None  # first stage from a TREC run file


@dataclass(frozen=True)
class _Depths:
    quality: dict[str, dict[int, dict[str, float]]]  # split -> depth -> metric means
    curve_rows: list[dict[str, Any]]
    per_query_rows: list[dict[str, Any]]
    rankings: dict[int, dict[str, list[str]]]  # depth -> every judged query's top recall_k


@dataclass(frozen=True)
class _Latency:
    by_depth: dict[int, dict[str, float]]  # whole stage p50/p95/... + rerank p50/p95 (ms)
    rows: list[dict[str, Any]]
    rr_ms: dict[int, np.ndarray]  # rerank call ms per sampled query
    n_sample: int


def _queries(spec: RerankSweepSpec) -> _Queries:
    coll = load_collection(spec)
    qids = judged_queries(coll, spec)
    corpus_ids = list(coll.corpus)
    tuning, heldout = split_queries(qids, spec.tuning_fraction, spec.seed)
    q = _Queries(coll, qids, [coll.queries[i] for i in qids], corpus_ids,
                 [coll.corpus[d] for d in corpus_ids],
                 {"tuning": tuning, "heldout": heldout, "all": qids})
    log.info("%s: %d docs, %d judged queries (%d tuning / %d held-out)", coll.name,
             len(q.corpus), len(qids), len(tuning), len(heldout))
    return q


def _first_stages(spec: RerankSweepSpec, q: _Queries) -> _FirstStages:
    """Build BM25 and dense; evaluate each alone on every judged query; time single queries."""
    embedder = get_embedder(spec.embedder.model)
    bm25 = BM25Stage(spec.bm25)
    bm25.build(q.corpus)
    dense = DenseStage(
        embedder,
        backend=spec.dense.backend,
        metric=spec.dense.metric,
        build_params=spec.dense.build,
        search_params=spec.dense.search,
        batch_size=spec.embedder.batch_size,
    )
    dense.build(q.corpus)
    fetch = spec.fetch_k
    cands: dict[str, Candidates] = {"bm25": bm25.search(q.qtexts, fetch),
                                    "dense": dense.search(q.qtexts, fetch)}
    run_info: dict[str, Any] | None = None
    if spec.first_stage_name == "run":
        cands["run"], run_info = run_file_candidates(spec, q.qids, q.corpus_ids, fetch)
    quality: dict[str, dict[str, float]] = {}
    unknown: dict[str, list[str]] = {}
    policy: dict[str, Any] = {}
    for name, c in cands.items():
        s = evaluate_collection(q.coll, c.rankings(q.qids, q.corpus_ids, spec.recall_k),
                                spec.metrics, query_ids=q.qids)
        quality[name] = _metrics_row(s.means)
        unknown, policy = s.unknown_docs, s.policy()
    _, bm25_ms = bm25.time_queries(q.qtexts, fetch)
    _, dense_ms = dense.time_queries(q.qtexts, fetch)
    stage_ms = {"bm25": bm25_ms, "dense": dense_ms}
    if run_info is not None:  # the user's retriever ran elsewhere: its latency is not known
        stage_ms["run"] = np.zeros(len(q.qids))
    return _FirstStages(embedder, dense, cands, quality, stage_ms, unknown, policy, run_info)


def _depth_quality(spec: RerankSweepSpec, q: _Queries, main: Candidates,
                   rscores: RerankScores) -> _Depths:
    """Every depth evaluated offline from the one scoring pass, on each split."""
    metrics = spec.metrics
    curve_rows: list[dict[str, Any]] = []
    per_query_rows: list[dict[str, Any]] = []
    quality: dict[str, dict[int, dict[str, float]]] = {s: {} for s in q.splits}
    by_depth: dict[int, dict[str, list[str]]] = {}
    for d in sorted(spec.depths):
        rankings = reranked_rankings(main, rscores, d, q.qids, q.corpus_ids, k=spec.recall_k)
        by_depth[d] = rankings
        for split, ids in q.splits.items():
            s = evaluate_collection(q.coll, rankings, metrics, query_ids=ids)
            quality[split][d] = _metrics_row(s.means)
            curve_rows.append({"depth": d, "split": split, "n_queries": s.n_queries,
                               **quality[split][d]})
            if split == "all":
                for qid in ids:
                    per_query_rows.append({"depth": d, "query_id": qid,
                                           **{m: s.per_query[m][qid] for m in metrics}})
    return _Depths(quality, curve_rows, per_query_rows, by_depth)


def _depth_latency(spec: RerankSweepSpec, q: _Queries, main: Candidates, timing_rr: Reranker,
                   stage_ms: np.ndarray, progress: Progress | None) -> _Latency:
    """Actual rerank calls at every depth on a seeded sample; whole stage = first stage (the
    same query's measured single-query ms) + rerank call."""
    depths = sorted(spec.depths)
    n_sample = min(spec.latency.sample_queries, len(q.qids))
    sample = np.sort(np.random.default_rng(spec.seed + 1).choice(len(q.qids), n_sample,
                                                                  replace=False))
    passages = [[q.corpus[j] for j in main.row(int(i), spec.max_depth)] for i in sample]
    rr_ms = time_rerank_calls(timing_rr, [q.qtexts[int(i)] for i in sample], passages, depths,
                              warmup=spec.latency.warmup, repeats=spec.latency.repeats,
                              progress=progress)
    fs_ms = stage_ms[sample]
    by_depth: dict[int, dict[str, float]] = {}
    rows: list[dict[str, Any]] = []
    for d in depths:
        total = fs_ms + rr_ms[d]
        rr_summ = latency_summary(rr_ms[d])
        by_depth[d] = {**latency_summary(total), "rerank_p50_ms": rr_summ["p50_ms"],
                       "rerank_p95_ms": rr_summ["p95_ms"]}
        for j, i in enumerate(sample):
            rows.append({"depth": d, "query_id": q.qids[int(i)],
                         "first_stage_ms": float(fs_ms[j]),
                         "rerank_ms": float(rr_ms[d][j]), "stage_ms": float(total[j])})
    return _Latency(by_depth, rows, rr_ms, int(n_sample))


def run_rerank_sweep(
    spec: RerankSweepSpec,
    out: Path | str | None = None,
    *,
    spec_source: str = "<memory>",
    progress: Progress | None = None,
    force: bool = False,
    reranker: Any = None,
) -> RerankRunResult:
    """Run the sweep described by ``spec``; write and return the summary. A non-empty ``out``
    is refused unless ``force``; manifest.json records the run's status. ``reranker``: a
    callable (query, passages) -> scores (or a reranker object) used instead of the spec's
    (whose ``reranker.kind`` should then be ``callable``)."""
    rd = RunDir.create(out, spec.name, force=force)
    with rd.recording():
        return _rerank_into(rd, spec, spec_source, progress, reranker)


def _rerank_into(rd: RunDir, spec: RerankSweepSpec, spec_source: str,
                 progress: Progress | None, reranker: Any = None) -> RerankRunResult:
    q = _queries(spec)
    fs = _first_stages(spec, q)
    # one scoring pass at the largest depth
    quality_rr, timing_rr, rr_info = build_rerankers(spec, fs.embedder, q.corpus, fs.dense,
                                                     reranker, q.qtexts)
    main = fs.cands[spec.first_stage_name]
    rscores = score_candidates(quality_rr, q.qtexts, q.corpus, main, spec.max_depth,
                               progress=progress)
    depths = _depth_quality(spec, q, main, rscores)
    latency = _depth_latency(spec, q, main, timing_rr, fs.stage_ms[spec.first_stage_name],
                             progress)
    choice = choose_depth(
        {d: depths.quality["tuning"][d][spec.metric] for d in sorted(spec.depths)}, spec.tolerance
    )
    router_summary: dict[str, Any] | None = None
    router_rows: list[dict[str, Any]] = []
    if spec.router.enabled:
        router_summary, router_rows = _tune_router(
            spec, q, fs, rscores, quality_rr, latency, choice.depth, progress, depths
        )
    summary = _summarise(spec, rd, q, fs, rr_info, depths, latency, choice, router_summary)
    quality = None if spec.target is None else pair_search(
        spec, q.coll, q.splits["tuning"], q.corpus, q.corpus_ids, fs.dense, quality_rr,
        latency.by_depth, choice.depth)
    summary = summary.model_copy(update={"quality": quality, "trec_runs": write_trec_runs(
        rd, spec, q, main, depths, choice, rscores)})
    _write_run(rd, spec, spec_source, q, fs, rr_info, summary, depths, latency, router_rows)
    return RerankRunResult(summary=summary.to_json_dict(), run_dir=rd)


def write_trec_runs(rd: RunDir, spec: RerankSweepSpec, q: _Queries, main: Candidates,
                    depths: _Depths, choice: DepthChoice,
                    rscores: RerankScores | None = None) -> dict[str, str]:
    """TREC run files (``runs/depth-<d>.trec``, top ``recall_k`` of every judged query) for
    depth 0 (the first stage alone), the chosen and the best depth; role -> file (relative).

    Scores are the stage's real ones (:func:`staged_scores`): the first stage's at depth 0; at
    depth d the reranker's for the top d and the first stage's for the tail, shifted per query
    below the head's lowest so that score order is rank order."""
    from retrieval.loaders.trec import write_run

    out: dict[str, str] = {}
    for role, d in (("depth_0", 0), ("chosen", choice.depth), ("best", choice.best_depth)):
        ranked, scores = staged_scores(main, rscores, d, q.qids, q.corpus_ids, spec.recall_k)
        name = f"runs/depth-{d}.trec"
        write_run(rd.path / name, ranked, f"rwb-{spec.first_stage_name}-rerank{d}", scores)
        out[role] = name
    return out


def staged_scores(main: Candidates, rscores: RerankScores | None, depth: int,
                  query_ids: Sequence[str], corpus_ids: Sequence[str], k: int
                  ) -> tuple[dict[str, list[str]], dict[str, list[float]]]:
    """(query id -> doc ids, query id -> scores) of the first stage reranked at ``depth``: the
    reranker's score for each of the top ``depth`` (sorted, ties in first-stage order), the
    first stage's score for the rest, minus one per-query constant that puts the tail's best
    strictly below the head's lowest (so the order holds for any reader that sorts by score).
    Depth 0 (or no ``rscores``): the first stage's own scores."""
    ranked: dict[str, list[str]] = {}
    scored: dict[str, list[float]] = {}
    for i, qid in enumerate(query_ids):
        row = main.row(i)
        fs = np.asarray(main.scores[i, : len(row)], dtype=np.float64)
        n = 0 if rscores is None else min(depth, len(row), rscores.depth)
        if n > 0:
            assert rscores is not None
            head_s = np.asarray(rscores.scores[i, :n], dtype=np.float64)
            order = np.argsort(-head_s, kind="stable")
            docs = np.concatenate([row[:n][order], row[n:]])
            head, tail = head_s[order], fs[n:]
            if len(tail) and np.isfinite(tail).all():
                gap = max(1e-6, 1e-6 * abs(float(head[-1])))
                tail = tail - (float(tail[0]) - float(head[-1]) + gap) if tail[0] >= head[-1] \
                    else tail
            vals = np.concatenate([head, tail])
        else:
            docs, vals = row, fs
        docs, vals = docs[:k], vals[:k]
        ranked[qid] = [corpus_ids[j] for j in docs]
        scored[qid] = [float(v) for v in vals]
    return ranked, scored


def _summarise(spec: RerankSweepSpec, rd: RunDir, q: _Queries, fs: _FirstStages,
               rr_info: dict[str, Any], depths: _Depths, latency: _Latency, choice: DepthChoice,
               router: dict[str, Any] | None) -> RerankSweepSummary:
    quality, lat = depths.quality, latency.by_depth
    first_latency = {name: latency_summary(ms) for name, ms in fs.stage_ms.items()}
    return RerankSweepSummary.model_validate({
        "name": spec.name,
        "run_dir": str(rd.path),
        "dataset": q.coll.name,
        "dataset_path": dataset_path(q.coll),
        "dataset_split": q.coll.info.get("split"),
        "dataset_info": dataset_record(spec.dataset, q.coll),
        "dataset_fingerprint": q.coll.fingerprint,
        "relevance": relevance_note(spec.dataset, q.coll),
        "n_docs": len(q.corpus),
        "n_queries": len(q.qids),
        "n_tuning": len(q.splits["tuning"]),
        "n_heldout": len(q.splits["heldout"]),
        "dense_ndcg@10": fs.quality["dense"]["ndcg@10"],
        "bm25_ndcg@10": fs.quality["bm25"]["ndcg@10"],
        "first_stage": {
            name: {"all": fs.quality[name], "latency": first_latency[name]} for name in fs.cands
        },
        "bm25": spec.bm25.convention(),
        "dense": {"backend": spec.dense.backend, "metric": spec.dense.metric,
                  "build": spec.dense.build, "search": spec.dense.search,
                  "embedder": fs.embedder.model_id},
        "sweep_first_stage": spec.first_stage_name,
        "run_file": fs.run_info,
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
            "latency": lat[choice.depth],
        },
        "curve": [
            {"depth": d, "tuning": quality["tuning"][d], "heldout": quality["heldout"][d],
             "all": quality["all"][d], "latency": lat[d]}
            for d in sorted(spec.depths)
        ],
        "latency_mode": LATENCY_MODE,
        "latency_sample_queries": latency.n_sample,
        "evaluation_policy": EVAL_POLICY,
        "evaluation_counts": fs.policy,
        "unknown_judged_doc_ids": fs.unknown,
        "router": router and {k: v for k, v in router.items() if k != "adaptive"},
        **({"adaptive": [router["adaptive"]]} if router and router.get("adaptive") else {}),
    })


def _write_run(rd: RunDir, spec: RerankSweepSpec, spec_source: str, q: _Queries,
               fs: _FirstStages, rr_info: dict[str, Any], summary: RerankSweepSummary,
               depths: _Depths, latency: _Latency, router_rows: list[dict[str, Any]]) -> None:
    rd.write_yaml("spec.yaml", {**spec.model_dump(mode="json"), "source": spec_source})
    rd.write_manifest(
        spec_source=spec_source,
        kind=RerankSweepSummary.KIND,
        seed=spec.seed,
        dataset={"name": q.coll.name, "fingerprint": q.coll.fingerprint,
                 "source": q.coll.source, "path": dataset_path(q.coll),
                 "split": q.coll.info.get("split"), "spec": spec.dataset},
        bm25=spec.bm25.convention(),
        embedder=fs.embedder.model_id,
        reranker=rr_info,
        latency_mode=LATENCY_MODE,
        evaluation_policy=EVAL_POLICY,
    )
    rd.write_table("curve.parquet", depths.curve_rows)
    rd.write_table("per_query.parquet", depths.per_query_rows)
    rd.write_table("latency.parquet", latency.rows)
    if router_rows:
        rd.write_table("router.parquet", router_rows)
    rd.write_summary(summary)


def _router_inputs(
    spec: RerankSweepSpec, q: _Queries, fs: _FirstStages, rscores: RerankScores,
    quality_rr: Reranker, rr_ms: dict[int, np.ndarray], depth: int, progress: Progress | None,
) -> tuple[RouteInputs, dict[str, list[str]], dict[str, list[str]]]:
    """Per-query quality and latency of the primary path (dense + rerank at ``depth``) and of
    the fallback (BM25, no rerank), with the primary and fallback rankings."""
    dense_c = fs.cands["dense"]
    k_eval = spec.recall_k
    if depth > 0:
        scores = (
            rscores if spec.first_stage == "dense"
            else score_candidates(quality_rr, q.qtexts, q.corpus, dense_c, depth,
                                  progress=progress)
        )
        primary = reranked_rankings(dense_c, scores, depth, q.qids, q.corpus_ids, k=k_eval)
    else:
        primary = dense_c.rankings(q.qids, q.corpus_ids, k_eval)
    fallback = fs.cands["bm25"].rankings(q.qids, q.corpus_ids, k_eval)
    m = spec.metric
    pq = evaluate_collection(q.coll, primary, [m], query_ids=q.qids).per_query[m]
    fq = evaluate_collection(q.coll, fallback, [m], query_ids=q.qids).per_query[m]
    # rerank cost on the primary path: median of the actual calls at that depth (sample)
    rerank_cost = float(np.median(rr_ms[depth])) if depth > 0 else 0.0
    dense_ms = fs.stage_ms["dense"]
    inputs = RouteInputs(
        query_ids=tuple(q.qids),
        top1=dense_c.top1(),
        primary_quality=np.array([pq[i] for i in q.qids]),
        fallback_quality=np.array([fq[i] for i in q.qids]),
        primary_ms=dense_ms + rerank_cost,
        fallback_ms=dense_ms + fs.stage_ms["bm25"],
    )
    return inputs, primary, fallback


def _tune_router(
    spec: RerankSweepSpec, q: _Queries, fs: _FirstStages, rscores: RerankScores,
    quality_rr: Reranker, latency: _Latency, chosen_depth: int,
    progress: Progress | None, depths: _Depths,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    depth = spec.router.rerank_depth if spec.router.rerank_depth is not None else chosen_depth
    inputs, primary, fallback = _router_inputs(spec, q, fs, rscores, quality_rr, latency.rr_ms,
                                               depth, progress)
    tune_in = inputs.subset(q.splits["tuning"])
    held_in = inputs.subset(q.splits["heldout"])
    thresholds = spec.router.thresholds or candidate_thresholds(tune_in.top1,
                                                                spec.router.quantiles)
    points = sweep_thresholds(tune_in, thresholds)
    chosen = choose_threshold(points, spec.router.tolerance)
    held = {name: sweep_thresholds(held_in, [t])[0]
            for name, t in (("chosen", chosen.threshold), ("never", -math.inf),
                            ("always", math.inf))}
    mask = route_mask(inputs.top1, chosen.threshold)
    routed = routed_rankings(q.qids, primary, fallback, mask)
    held_all = evaluate_collection(q.coll, routed, spec.metrics, query_ids=q.splits["heldout"])
    rows = [{"split": "tuning", **p.as_row()} for p in points]
    rows += [{"split": "heldout", "role": name, **p.as_row()} for name, p in held.items()]
    summary = {
        "rule": (
            "route to BM25 (no rerank) when dense top-1 similarity < threshold; chosen on the "
            "tuning split: lowest mean latency among thresholds within tolerance of the best "
            f"{spec.metric}"
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
        "heldout_verdict": router_verdict(held["chosen"].quality, held["never"].quality,
                                          spec.router.tolerance, len(q.splits["heldout"])),
        "adaptive": router_vs_fixed_depth(held_in, route_mask(held_in.top1, chosen.threshold),
                                          depth, spec.metric, depths.per_query_rows,
                                          spec.first_stage_name, latency.by_depth),
    }
    return summary, rows


#: fewer held-out queries than this: the router's held-out comparison is flagged as small
ROUTER_SMALL_SAMPLE = 50


def router_verdict(chosen: float, never: float, tolerance: float, n: int) -> dict[str, Any]:
    """Whether the chosen router holds on the held-out queries against never routing (quality
    means 0..1): ``loses`` when it is below never routing by more than ``tolerance`` (then it
    is not recommended), and ``small_sample`` under :data:`ROUTER_SMALL_SAMPLE` queries."""
    loses = chosen < never - tolerance
    small = n < ROUTER_SMALL_SAMPLE
    line = (f"the router LOSES on the held-out queries ({chosen:.3f} vs {never:.3f} never "
            f"routing): not recommended" if loses else
            f"the router holds on the held-out queries ({chosen:.3f} vs {never:.3f} never "
            f"routing, tolerance {tolerance:g})")
    if small:
        line += f"; only {n} held-out queries: a small sample"
    return {"loses": loses, "recommended": not loses, "small_sample": small, "queries": n,
            "line": line}


def _sim_unit(metric: str) -> str:
    return {
        "cosine": "cosine similarity (-1..1; = 1 - rwb cosine distance)",
        "ip": "inner product",
        "l2": "negative squared L2 distance",
    }[metric]


__all__ = [
    "ROUTER_SMALL_SAMPLE",
    "DepthPoint",
    "RerankRunResult",
    "RerankSweepSummary",
    "RouterSummary",
    "load_collection",
    "router_verdict",
    "run_file_candidates",
    "run_rerank_sweep",
]
