"""BM25 first stage: pinned tokenisation, both libraries, zero-score policy, bad input."""

import numpy as np
import pytest

from retrieval.errors import ConfigError, DataError
from retrieval.params import validate_params
from retrieval.rerank.bm25 import BM25Index, BM25Params

CORPUS = [
    "The cat sat on the mat while running.",
    "Dogs are running in the park with their owners.",
    "Quantum computers factor integers quickly.",
    "A recipe for bread with flour, water and salt.",
    "Stock markets fell sharply on Monday.",
]


def test_tokenizer_removes_stopwords_and_stems():
    toks = BM25Index().tokenize(["The dogs are running quickly"])[0]
    assert "the" not in toks and "are" not in toks
    assert "run" in toks and "dog" in toks
    plain = BM25Index(BM25Params(stopwords="none", stemmer="none")).tokenize(["The dogs"])[0]
    assert plain == ["the", "dogs"]


@pytest.mark.parametrize(
    "params",
    [
        BM25Params(),
        BM25Params(implementation="bm25s", method="lucene", k1=1.2),
        BM25Params(implementation="bm25s", method="atire", idf_method="robertson"),
    ],
)
def test_matching_doc_ranks_first_and_zero_scores_are_dropped(params):
    index = BM25Index(params).build(CORPUS)
    hits = index.search(["quantum integer factoring", "run dog", "zebra xylophone"], k=5)
    assert hits.doc_idx[0, 0] == 2
    assert hits.doc_idx[1, 0] == 1  # "dogs" + "running" beats "running" alone
    # only docs sharing a term are returned; the rest of the row is padding
    assert hits.doc_idx[0, 1] == -1 and np.isneginf(hits.scores[0, 1])
    assert (hits.doc_idx[2] == -1).all()
    assert (np.diff(hits.scores[1][hits.doc_idx[1] >= 0]) <= 0).all()


def test_bm25s_atire_robertson_equals_rank_bm25_without_frequent_terms():
    queries = ["cat mat", "bread flour salt", "markets monday", "dogs park owners run"]
    a = BM25Index(BM25Params()).build(CORPUS).search(queries, k=5)
    b = BM25Index(
        BM25Params(implementation="bm25s", method="atire", idf_method="robertson")
    ).build(CORPUS).search(queries, k=5)
    assert (a.doc_idx == b.doc_idx).all()
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5)


def test_convention_is_recorded():
    conv = BM25Params().convention()
    assert conv["variant"] == "rank_bm25.BM25Okapi"
    assert (conv["k1"], conv["b"], conv["epsilon"]) == (1.5, 0.75, 0.25)
    assert "snowball" in conv["stemmer"].lower()
    lucene = BM25Params(implementation="bm25s", method="lucene", k1=1.2).convention()
    assert lucene["method"] == "lucene" and lucene["k1"] == 1.2 and "epsilon" not in lucene


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"implementation": "rank-bm25", "method": "lucene"}, "bm25s options"),
        ({"implementation": "bm25s", "epsilon": 0.5}, "rank-bm25 option"),
        ({"k1": 0}, "field 'k1' must be > 0"),
        ({"b": 1.5}, "field 'b' must be <= 1"),
        ({"implementation": "lucene"}, "implementation"),
        ({"k": 1.2}, "unknown parameter"),
    ],
)
def test_bad_params_name_the_field(data, fragment):
    with pytest.raises(ConfigError, match=fragment):
        validate_params(BM25Params, data, where="spec.yaml")


def test_bad_use():
    index = BM25Index()
    with pytest.raises(ConfigError, match="before build"):
        index.search(["x"], k=3)
    with pytest.raises(DataError, match="not a single string"):
        index.build("one string")
    with pytest.raises(DataError, match="is empty"):
        index.build([])
    index.build(CORPUS)
    with pytest.raises(ConfigError, match="field 'k' must be an integer >= 1; received 0"):
        index.search(["cat"], k=0)
    # a query that tokenises to nothing returns no documents, not arbitrary ones
    assert (index.search(["the of and"], k=3).doc_idx == -1).all()
