"""Depth sweep mechanics: prefix evaluation from one scoring pass equals re-running per depth,
the tail keeps first-stage order, depth choice, query split, call timing."""

import numpy as np
import pytest

from retrieval.embed import SentenceTransformerEmbedder
from retrieval.errors import ConfigError, DataError
from retrieval.rerank.firststage import BM25Stage
from retrieval.rerank.rerankers import BiEncoderReranker
from retrieval.rerank.tune import (
    choose_depth,
    rerank_order,
    reranked_rankings,
    score_candidates,
    split_queries,
    time_rerank_calls,
)
from retrieval.stats.irmetrics import evaluate_rankings

# every document mentions "study", so BM25 returns all of them and the reranker has work to do
CORPUS = [
    "A study of football tactics in the premier league.",
    "A study of insulin resistance and type 2 diabetes in adults.",
    "A study of volcanic eruptions and ash clouds.",
    "A study on the effect of metformin on blood glucose.",
    "A study of medieval castle architecture.",
    "A study of deep learning for image classification.",
    "A study of coral reef bleaching under warming oceans.",
    "A study of diabetic patients treated with insulin pumps.",
    "A study about convolutional networks recognising pictures.",
    "A study of sea temperature and reef health.",
]
IDS = [f"d{i}" for i in range(len(CORPUS))]
QUERIES = ["study diabetes treatment", "study neural nets for vision", "study ocean coral"]
QIDS = ["q0", "q1", "q2"]
QRELS = {"q0": {"d1": 1, "d3": 1, "d7": 1}, "q1": {"d5": 1, "d8": 1}, "q2": {"d6": 1, "d9": 1}}


def test_rerank_order_sorts_the_head_and_keeps_the_tail():
    first = np.array([10, 11, 12, 13, 14])
    scores = np.array([0.1, 0.9, 0.5, 100.0, 100.0])  # tail scores must be ignored
    assert rerank_order(first, scores, 3).tolist() == [11, 12, 10, 13, 14]
    assert rerank_order(first, scores, 0).tolist() == first.tolist()
    # depth beyond the list reranks the whole list
    assert rerank_order(first[:2], scores[:2], 5).tolist() == [11, 10]
    # ties keep first-stage order
    assert rerank_order(first, np.array([1.0, 1.0, 2.0]), 3).tolist() == [12, 10, 11, 13, 14]
    with pytest.raises(DataError):
        rerank_order(first, np.array([1.0, np.nan, 2.0]), 3)


@pytest.fixture(scope="module")
def real_case():
    stage = BM25Stage()
    stage.build(CORPUS)
    cands = stage.search(QUERIES, k=10)
    assert (cands.doc_idx >= 0).all()  # all ten docs retrieved for every query
    return cands, BiEncoderReranker(SentenceTransformerEmbedder())


@pytest.mark.model
def test_prefix_evaluation_equals_rerunning_the_model_at_each_depth(real_case):
    cands, reranker = real_case
    once = score_candidates(reranker, QUERIES, CORPUS, cands, depth=10)
    assert once.scores.shape == (3, 10) and once.call_ms.shape == (3,)
    first = cands.rankings(QIDS, IDS)
    changed = False
    for d in (0, 1, 3, 6, 10):
        prefix = reranked_rankings(cands, once, d, QIDS, IDS)
        rerun_scores = score_candidates(reranker, QUERIES, CORPUS, cands, depth=d)
        rerun = reranked_rankings(cands, rerun_scores, d, QIDS, IDS)
        assert prefix == rerun
        a = evaluate_rankings(QRELS, prefix).means
        b = evaluate_rankings(QRELS, rerun).means
        assert a == pytest.approx(b)
        for q in QIDS:  # the tail below d stays in first-stage order
            assert prefix[q][d:] == first[q][d:]
            assert sorted(prefix[q]) == sorted(first[q])
        changed |= prefix != first
    assert changed  # the reranker did reorder something
    with pytest.raises(ConfigError, match="exceeds the scored depth"):
        reranked_rankings(cands, score_candidates(reranker, QUERIES, CORPUS, cands, 2), 5, QIDS,
                          IDS)


@pytest.mark.model
def test_time_rerank_calls_measures_every_depth(real_case):
    cands, reranker = real_case
    passages = [[CORPUS[j] for j in cands.row(i)] for i in range(len(QUERIES))]
    ms = time_rerank_calls(reranker, QUERIES, passages, [0, 2, 8], warmup=1, repeats=2)
    assert set(ms) == {0, 2, 8}
    assert (ms[0] == 0).all() and (ms[2] > 0).all() and (ms[8] > 0).all()
    with pytest.raises(DataError):
        time_rerank_calls(reranker, QUERIES, passages[:1], [2])


def test_choose_depth_takes_the_smallest_within_tolerance():
    curve = {0: 0.60, 5: 0.66, 10: 0.675, 20: 0.68, 50: 0.679}
    c = choose_depth(curve, 0.005)
    assert (c.depth, c.best_depth, c.best_quality) == (10, 20, 0.68) and not c.no_rerank_wins
    assert choose_depth(curve, 0.0).depth == 20
    assert choose_depth(curve, 0.1).depth == 0 and choose_depth(curve, 0.1).no_rerank_wins
    worse = {0: 0.70, 10: 0.65, 100: 0.69}
    assert choose_depth(worse, 0.005).no_rerank_wins
    with pytest.raises(ConfigError, match="field 'tolerance' must be in \\[0, 1\\]"):
        choose_depth(curve, -0.1)


def test_split_is_seeded_disjoint_and_complete():
    ids = [f"q{i}" for i in range(40)]
    a1, b1 = split_queries(ids, 0.5, seed=0)
    a2, b2 = split_queries(ids, 0.5, seed=0)
    a3, _ = split_queries(ids, 0.5, seed=1)
    assert (a1, b1) == (a2, b2) and a1 != a3
    assert not set(a1) & set(b1) and sorted(a1 + b1) == sorted(ids) and len(a1) == 20
    with pytest.raises(ConfigError, match="tuning_fraction"):
        split_queries(ids, 1.0, seed=0)
    with pytest.raises(DataError, match="at least 2 queries"):
        split_queries(["q"], 0.5, seed=0)
