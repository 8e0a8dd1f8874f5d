"""Golden checks on SciFact (BEIR test: 300 claims, 5,183 abstracts) from ../shared/data.

- exact dense retrieval with the packaged all-MiniLM-L6-v2 (faiss-flat, cosine): nDCG@10 within
  +-0.005 of 0.6451 (the published MTEB figure for all-MiniLM-L6-v2 is 0.64508);
- BM25 with the pinned convention (rank-bm25 BM25Okapi k1 1.5, b 0.75, epsilon 0.25; bm25s
  tokenisation with English stopwords and Snowball stemming): within +-0.015 of 0.685 (the
  bm25-benchmarks rank-bm25 figure).

The corpus embedding takes ~1-2 min on 2 cores once; it is cached in ~/.cache/rwb afterwards.
"""

import pytest

from retrieval.errors import DataError
from retrieval.rerank.bm25 import BM25Params
from retrieval.rerank.firststage import BM25Stage, DenseStage
from retrieval.stats.irmetrics import evaluate_collection

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scifact():
    from retrieval.loaders.shared import load_scifact, shared_folder

    try:
        shared_folder("scifact")
    except DataError as exc:
        pytest.skip(f"SciFact data folder absent: {exc}")
    coll = load_scifact("test")
    assert len(coll.corpus) == 5183 and len(coll.queries) == 300
    return coll


def _ndcg(coll, stage):
    qids = list(coll.queries)
    ids = list(coll.corpus)
    stage.build([coll.corpus[d] for d in ids])
    cands = stage.search([coll.queries[q] for q in qids], k=100)
    scores = evaluate_collection(coll, cands.rankings(qids, ids), ["ndcg@10", "recall@100"])
    assert scores.n_queries == 300 and not scores.missing_queries and not scores.unknown_docs
    return scores.means


@pytest.mark.model
def test_minilm_exact_dense_ndcg10_matches_mteb(scifact):
    from retrieval.embed import default_embedder

    stage = DenseStage(default_embedder(), backend="faiss-flat", metric="cosine")
    means = _ndcg(scifact, stage)
    assert means["ndcg@10"] == pytest.approx(0.6451, abs=0.005)


def test_bm25_rank_bm25_ndcg10_matches_bm25_benchmarks(scifact):
    params = BM25Params()  # the pinned convention: rank-bm25 BM25Okapi, stopwords, stemming
    assert params.convention()["variant"] == "rank_bm25.BM25Okapi"
    means = _ndcg(scifact, BM25Stage(params))
    assert means["ndcg@10"] == pytest.approx(0.685, abs=0.015)
    assert means["recall@100"] > 0.85
