"""The retrieval leg of the study: a collection's judged queries (SciFact claims by default, any
collection the rerank spec takes) through the embedder, an index searched at each
value of one knob, and a reranker at each depth. Everything a trial needs is measured here once:

- **quality**: per query and per (knob value, depth), nDCG@k with the qrels (ranx, through
  :mod:`retrieval.stats.irmetrics`) and recall@k by id against exact dense search with the same
  embeddings. The reranker scores each (query, candidate) pair once (pointwise, see
  :mod:`retrieval.rerank.rerankers`); every depth is a prefix re-ordering of those scores
  (:func:`retrieval.rerank.tune.reranked_rankings`). A depth-d config fetches ``max(d, k)``
  candidates, searched with that k (HNSW adapters widen ef to k, so a wider fetch is a different
  search).
- **latency** (ms): every query's single-call embedding (the model, not the disk cache) and
  single-query index search at every (knob value, fetch size); the reranker's actual calls at
  every depth on a seeded sample of queries (the timing reranker encodes for real).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from retrieval.embed import CachedEmbedder, Embedder, get_embedder
from retrieval.indexes import create_index
from retrieval.indexes.buildcache import IndexCache, build_or_load
from retrieval.indexes.engine import backend_for
from retrieval.indexes.entry import apply_search
from retrieval.rerank.firststage import Candidates, distances_to_similarity
from retrieval.rerank.rerankers import Reranker, score_passages
from retrieval.rerank.rerankers import make_rerankers as shared_rerankers
from retrieval.rerank.run import judged_query_ids
from retrieval.rerank.spec import RerankerSpec
from retrieval.rerank.tune import (
    RerankScores,
    reranked_rankings,
    split_queries,
    time_rerank_calls,
)
from retrieval.stats.irmetrics import evaluate_collection, relevant_qrels
from retrieval.study.spec import StudySpec, study_index
from retrieval.timing import time_each

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass(frozen=True, eq=False)
class RetrievalTables:
    """Measurements of the retrieval leg, indexed [knob value, depth, query].

    ``ndcg``/``recall``: per-query nDCG@k and recall@k (0..1); ``search_ms[i_value, i_fetch]``:
    per-query single search (ms, every query); ``embed_ms``: single-call query embedding (ms) and
    ``rerank_ms[i_depth]``: rerank call (ms, 0 at depth 0), both on the ``sample`` queries.
    """

    query_ids: list[str]
    tuning: np.ndarray
    values: list[int]
    depths: list[int]
    fetch_sizes: list[int]
    ndcg: np.ndarray
    recall: np.ndarray
    embed_ms: np.ndarray
    search_ms: np.ndarray
    rerank_ms: np.ndarray
    sample: np.ndarray
    rankings: dict[tuple[int, int], dict[str, list[str]]]
    qrels: dict[str, dict[str, int]]
    info: dict[str, Any] = field(default_factory=dict)

    def fetch_index(self, depth: int, k: int) -> int:
        return self.fetch_sizes.index(max(depth, k))


def make_rerankers(
    r: RerankerSpec, embedder: CachedEmbedder, known: dict[str, np.ndarray]
) -> tuple[Reranker, Reranker, dict[str, Any]]:
    """(quality reranker, timing reranker, description): :func:`retrieval.rerank.rerankers.
    make_rerankers` with the study's stored passage vectors (``known``, same model)."""
    return shared_rerankers(
        r.kind, r.model, batch_size=r.batch_size, max_length=r.max_length, embedder=embedder,
        known=known, quality_note="stored vectors of the same model looked up (identical scores)",
    )


def _time_searches(index: Any, q: np.ndarray, k: int, warmup: int) -> np.ndarray:
    """Single-query search latency (ms) of every query, after ``warmup`` untimed ones."""
    rows = [q[i : i + 1] for i in range(len(q))]
    _, ms = time_each(partial(index.search, k=k), rows, warmup=warmup)
    return ms


def _time_embeds(inner: Embedder, texts: Sequence[str], warmup: int) -> np.ndarray:
    """Single-call embedding latency (ms) of every text, after ``warmup`` untimed ones."""
    _, ms = time_each(partial(inner.embed, batch_size=1), [[t] for t in texts], warmup=warmup)
    return ms


@contextmanager
def _torch_threads(n: int | None) -> Iterator[int | None]:
    """Set torch's intra-op threads for the block (None: leave them); yields the count used."""
    try:
        import torch
    except ImportError:  # a cross-encoder-free, torch-free reranker: nothing to set
        yield None
        return
    before = int(torch.get_num_threads())
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield int(torch.get_num_threads())
    finally:
        torch.set_num_threads(before)


def _score_union(quality: Reranker, qtexts: Sequence[str], corpus: Sequence[str],
                 cands: Sequence[Candidates]) -> list[dict[int, float]]:
    """Reranker score of every (query, doc) pair any candidate list holds, scored once."""
    out: list[dict[int, float]] = []
    for i, q in enumerate(qtexts):
        docs = list(dict.fromkeys(int(j) for c in cands for j in c.row(i)))
        s = score_passages(quality, q, [corpus[j] for j in docs])
        out.append(dict(zip(docs, s.tolist())))
    return out


def _as_rerank_scores(c: Candidates, scored: list[dict[int, float]]) -> RerankScores:
    mat = np.full(c.doc_idx.shape, np.nan, dtype=np.float64)
    for i in range(c.doc_idx.shape[0]):
        row = c.row(i)
        mat[i, : len(row)] = [scored[i][int(j)] for j in row]
    return RerankScores(depth=c.k, scores=mat, call_ms=np.zeros(c.doc_idx.shape[0]))


def measure_retrieval(spec: StudySpec, progress: Progress | None = None) -> RetrievalTables:
    """Run the retrieval leg once (see the module docstring)."""
    from retrieval.rerank.dataset import dataset_record, load_dataset

    note = progress or (lambda s: None)
    rs, idx = spec.retrieval, spec.retrieval.index
    coll = load_dataset(rs.collection, rs.split)
    qids = judged_query_ids(coll, rs.max_queries, spec.seed)
    tuning_ids, _ = split_queries(qids, rs.tuning_fraction, spec.seed)
    tuning = np.isin(np.array(qids), np.array(tuning_ids))
    qtexts = [coll.queries[q] for q in qids]
    corpus_ids = list(coll.corpus)
    corpus = [coll.corpus[d] for d in corpus_ids]
    positions = np.array([i for i, t in enumerate(corpus) if t.strip()], dtype=np.int64)
    note("embedding corpus and queries (cached on disk)")
    embedder = get_embedder(rs.embedder.model)
    xb = embedder.embed([corpus[i] for i in positions], batch_size=rs.embedder.batch_size)
    xq = embedder.embed(qtexts, batch_size=rs.embedder.batch_size)
    k, fetches = rs.k, spec.fetch_sizes
    note("exact dense search (reference for recall)")
    exact = create_index(backend_for("exact"), int(xb.shape[1]), idx.metric, {})
    exact.build(xb, positions)
    exact_ids = exact.search(xq, k).ids
    exact.close()
    note(f"building {idx.backend} {idx.build}")
    checked = study_index(spec)  # validated when the spec was loaded
    (build,) = checked.builds()
    index = create_index(idx.backend, int(xb.shape[1]), idx.metric, build)
    # built once: later studies on the same vectors load it (build_s: the original build's)
    built_info, outcome = build_or_load(IndexCache(), index, xb, positions)
    build_s = built_info.build_s
    cands: dict[tuple[int, int], Candidates] = {}
    search_ms = np.zeros((len(idx.values), len(fetches), len(qids)))
    for vi, (v, search) in enumerate(zip(idx.values, checked.search_grid)):
        apply_search(index, checked.config(build, search))
        for fi, f in enumerate(fetches):
            res = index.search(xq, f)
            cands[(vi, fi)] = Candidates(np.asarray(res.ids, dtype=np.int64),
                                         distances_to_similarity(res.distances, idx.metric))
            note(f"timing single searches {idx.knob}={v} k={f}")
            search_ms[vi, fi] = _time_searches(index, xq, f, spec.latency.search_warmup)
    index.close()
    known = dict(zip([corpus[i] for i in positions], xb)) | dict(zip(qtexts, xq))
    quality_rr, timing_rr, rr_info = make_rerankers(spec.rerank.reranker, embedder, known)
    note("reranker: one scoring pass over every candidate")
    scored = _score_union(quality_rr, qtexts, corpus, list(cands.values()))
    rscores = {key: _as_rerank_scores(c, scored) for key, c in cands.items()}
    depths = spec.rerank.depths
    ndcg = np.zeros((len(idx.values), len(depths), len(qids)))
    recall = np.zeros_like(ndcg)
    rankings: dict[tuple[int, int], dict[str, list[str]]] = {}
    metric = f"ndcg@{k}"
    pos_of = {d: i for i, d in enumerate(corpus_ids)}
    for vi, v in enumerate(idx.values):
        for di, d in enumerate(depths):
            fi = fetches.index(max(d, k))
            r = reranked_rankings(cands[(vi, fi)], rscores[(vi, fi)], d, qids, corpus_ids, k=k)
            rankings[(v, d)] = r
            s = evaluate_collection(coll, r, [metric], query_ids=qids)
            ndcg[vi, di] = [s.per_query[metric][q] for q in qids]
            for qi, q in enumerate(qids):
                got = {pos_of[doc] for doc in r[q]}
                truth = {int(j) for j in exact_ids[qi] if j >= 0}
                recall[vi, di, qi] = len(got & truth) / k
    lat = spec.latency
    rng = np.random.default_rng(spec.seed + 1)
    sample = np.sort(rng.choice(len(qids), min(lat.sample_queries, len(qids)), replace=False))
    stexts = [qtexts[int(i)] for i in sample]
    note(f"timing query embeddings and rerank calls on {len(sample)} queries")
    top = cands[(len(idx.values) - 1, len(fetches) - 1)]
    passages = [[corpus[j] for j in top.row(int(i))] for i in sample]
    with _torch_threads(lat.torch_threads) as threads:
        embed_ms = _time_embeds(embedder.inner, stexts, max(lat.warmup, 1))
        rr = time_rerank_calls(timing_rr, stexts, passages, depths, warmup=lat.warmup,
                               repeats=lat.repeats)
    rerank_ms = np.stack([rr[d] for d in depths])
    exact_rank = {q: [corpus_ids[int(j)] for j in exact_ids[i] if j >= 0]
                  for i, q in enumerate(qids)}
    exact_ndcg = evaluate_collection(coll, exact_rank, [metric], query_ids=qids).means[metric]
    info = {
        "collection": coll.name, "fingerprint": coll.fingerprint, "n_docs": len(positions),
        "dataset": dataset_record(rs.collection, coll),
        "n_queries": len(qids), "n_tuning": int(tuning.sum()),
        "n_heldout": int((~tuning).sum()), "embedder": embedder.model_id,
        "index": {"backend": idx.backend, "metric": idx.metric, "build": idx.build,
                  "knob": idx.knob, "fixed_search": idx.search, "build_s": build_s,
                  "build_cache": outcome.cache, "load_s": outcome.load_s},
        "reranker": rr_info, "exact_dense_ndcg": exact_ndcg,
        "latency_sample_queries": len(sample), "torch_threads": threads,
        "rerank_candidates": f"{idx.knob}={idx.values[-1]}, k={fetches[-1]} (timing calls)",
    }
    return RetrievalTables(qids, tuning, list(idx.values), list(depths), list(fetches), ndcg,
                           recall, embed_ms, search_ms, rerank_ms, sample, rankings,
                           relevant_qrels(coll.qrels, qids), info)


__all__ = ["RetrievalTables", "judged_query_ids", "make_rerankers", "measure_retrieval"]
