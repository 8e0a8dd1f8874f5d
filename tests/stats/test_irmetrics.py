"""IR metrics through ranx: order kept, missing queries score 0, unknown doc ids reported."""

import math

import pytest

from retrieval.data import TextCollection
from retrieval.errors import DataError
from retrieval.stats.irmetrics import evaluate_collection, evaluate_rankings

QRELS = {"q1": {"d1": 1}, "q2": {"d3": 2, "d4": 1}, "q3": {"d9": 1}, "q4": {"d2": 0}}


def test_values_match_hand_computed_ones():
    runs = {"q1": ["d1", "d2"], "q2": ["d5", "d3"], "q3": ["d9"]}
    s = evaluate_rankings(QRELS, runs, ["ndcg@10", "mrr@10", "recall@100"])
    assert s.per_query["ndcg@10"]["q1"] == pytest.approx(1.0)
    # q2: gain 2 at rank 2 -> 2/log2(3); ideal 2 + 1/log2(3) (grade is the gain)
    assert s.per_query["ndcg@10"]["q2"] == pytest.approx(
        (2 / math.log2(3)) / (2 + 1 / math.log2(3))
    )
    assert s.per_query["mrr@10"]["q2"] == pytest.approx(0.5)
    assert s.per_query["recall@100"]["q2"] == pytest.approx(0.5)
    # q4 has only a grade-0 judgment: not a judged query
    assert s.n_queries == 3
    assert s.means["mrr@10"] == pytest.approx((1 + 0.5 + 1) / 3)


def test_ranking_order_is_kept_not_tie_broken_by_doc_id():
    s = evaluate_rankings({"q": {"a": 1}}, {"q": ["b", "a"]}, ["mrr@10"])
    assert s.means["mrr@10"] == pytest.approx(0.5)
    s = evaluate_rankings({"q": {"b": 1}}, {"q": ["b", "a"]}, ["mrr@10"])
    assert s.means["mrr@10"] == pytest.approx(1.0)


def test_missing_queries_score_zero_and_unjudged_are_ignored():
    runs = {"q1": ["d1"], "q2": [], "qx": ["d1"]}
    s = evaluate_rankings(QRELS, runs, ["ndcg@10"])
    assert set(s.missing_queries) == {"q2", "q3"}
    assert s.per_query["ndcg@10"]["q2"] == 0.0 and s.per_query["ndcg@10"]["q3"] == 0.0
    assert s.means["ndcg@10"] == pytest.approx(1 / 3)
    assert s.unjudged_queries == ("qx",)
    assert s.policy()["missing_queries_scored_zero"] == 2


def test_query_subset_restricts_the_mean():
    runs = {"q1": ["d1"], "q2": ["d3"], "q3": []}
    s = evaluate_rankings(QRELS, runs, ["mrr@10"], query_ids=["q1", "q3"])
    assert s.n_queries == 2 and s.means["mrr@10"] == pytest.approx(0.5)


def test_unknown_judged_doc_ids_are_reported():
    coll = TextCollection(
        name="tiny",
        corpus={"d1": "alpha", "d2": "beta"},
        queries={"q1": "alpha?", "q2": "gamma?"},
        qrels={"q1": {"d1": 1}, "q2": {"ghost": 1, "d2": 1}},
    )
    s = evaluate_collection(coll, {"q1": ["d1"], "q2": ["d2"]}, ["recall@100"])
    assert s.unknown_docs == {"q2": ["ghost"]}
    # the unknown doc stays relevant and unretrievable: recall 1/2 for q2
    assert s.per_query["recall@100"]["q2"] == pytest.approx(0.5)
    assert s.policy()["unknown_judged_doc_ids"] == 1
    direct = evaluate_rankings(coll.qrels, {"q2": ["d2"]}, ["recall@100"], corpus_ids=coll.corpus)
    assert direct.unknown_docs == {"q2": ["ghost"]}


def test_bad_input():
    with pytest.raises(DataError, match="lists doc 'd1' twice"):
        evaluate_rankings(QRELS, {"q1": ["d1", "d1"]})
    with pytest.raises(DataError, match="must be an integer; received '1'"):
        evaluate_rankings({"q": {"d": "1"}}, {"q": ["d"]})  # type: ignore[dict-item]
    with pytest.raises(DataError, match="no query has a relevance judgment"):
        evaluate_rankings({"q": {"d": 0}}, {"q": ["d"]})
    with pytest.raises(DataError, match="at least one metric"):
        evaluate_rankings(QRELS, {}, [])


def test_ranx_sees_one_key_width_and_the_caller_gets_their_ids_back():
    """Every doc id reaches ranx as a key of RANX_KEY_WIDTH digits, numbered in sorted id order
    (ranx compiles its functions once per id width); scores are the hand-computed ones."""
    from retrieval.fusion import rrf_ranx
    from retrieval.stats.irmetrics import RANX_KEY_WIDTH, ranx_keys

    keys = ranx_keys([["b", "a-rather-long-doc-id-0001"]], [["z", "b"]])
    assert list(keys) == ["a-rather-long-doc-id-0001", "b", "z"]
    assert {len(k) for k in keys.values()} == {RANX_KEY_WIDTH}
    assert sorted(keys.values()) == [keys[d] for d in sorted(keys)]
    qrels = {"q1": {"a-rather-long-doc-id-0001": 2, "z": 1}, "q2": {"b": 1}}
    runs = {"q1": ["z", "b", "a-rather-long-doc-id-0001"], "q2": ["a-rather-long-doc-id-0001",
                                                                   "b"]}
    got = evaluate_rankings(qrels, runs, ["ndcg@10", "mrr@10"])
    # q1: gain 1 at rank 1, 2 at rank 3 -> (1 + 2/log2(4)) / (2 + 1/log2(3)); q2: 1 at rank 2
    assert got.per_query["ndcg@10"] == pytest.approx(
        {"q1": 2 / (2 + 1 / math.log2(3)), "q2": 1 / math.log2(3)})
    assert got.per_query["mrr@10"] == pytest.approx({"q1": 1.0, "q2": 0.5})
    fused = rrf_ranx({"a": {"q": [("x", 0.0), ("long-id-7", 0.0)]},
                      "b": {"q": [("long-id-7", 0.0)]}}, 5)
    assert [d for d, _ in fused["q"]] == ["long-id-7", "x"]
