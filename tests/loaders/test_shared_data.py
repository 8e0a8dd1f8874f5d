"""Real counts of the collections in ../shared/data (skipped only when that folder is absent)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from retrieval.errors import ConfigError
from retrieval.loaders import shared
from retrieval.paths import data_dir

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not data_dir().is_dir(), reason=f"shared data folder absent ({data_dir()}); set RWB_DATA_DIR"
)]


def test_scifact_beir_test_split() -> None:
    coll = shared.load_scifact()
    assert (len(coll.corpus), len(coll.queries)) == (5183, 300)
    assert sum(len(v) for v in coll.qrels.values()) == 339
    assert coll.unknown_qrels() == {}
    assert set(coll.qrels) == set(coll.queries)
    assert all(g == 1 for docs in coll.qrels.values() for g in docs.values())
    # title + " " + abstract sentences joined by spaces (no NumPy list notation left)
    doc = coll.corpus["4983"]
    assert doc.startswith("Microstructural development of human newborn cerebral white matter")
    assert "['" not in doc and "' '" not in doc
    assert coll.queries["1"] == "0-dimensional biomaterials show inductive properties."


def test_scifact_train_split_and_bad_split() -> None:
    coll = shared.load_scifact("train")
    assert len(coll.queries) == 809 and sum(len(v) for v in coll.qrels.values()) == 919
    with pytest.raises(ConfigError, match=r"split.*received 'dev'"):
        shared.load_scifact("dev")


def test_cranfield_counts_grades_and_query_mapping() -> None:
    coll = shared.load_cranfield()
    assert (len(coll.corpus), len(coll.queries)) == (1400, 225)
    grades = Counter(g for docs in coll.qrels.values() for g in docs.values())
    assert grades == {1: 353, 2: 387, 3: 734, 4: 363}
    assert set(coll.qrels) == {str(i) for i in range(1, 226)}
    assert coll.queries["1"].startswith("what similarity laws must be obeyed")
    assert coll.queries["3"].startswith("what problems of heat conduction")  # .I 004 in the file
    assert coll.info["empty_docs"] == ["471", "995"]
    assert "LOWER is MORE relevant" in str(coll.info["relevance_convention"])
    gain = shared.load_cranfield("gain")
    assert gain.qrels["1"]["184"] == 5 - coll.qrels["1"]["184"]
    assert coll.qrels["1"]["184"] == 2  # the cached parse was not mutated by the gain copy


def test_reuters_paragraphs() -> None:
    coll = shared.load_reuters_paragraphs()
    info = coll.info
    assert (info["n_records"], info["n_bodies"]) == (21578, 19043)
    assert len(coll.corpus) == info["n_paragraphs"] == 84175
    texts = list(coll.corpus.values())
    assert len(set(texts)) == len(texts)
    assert min(map(len, texts)) >= 40
    assert all(re.fullmatch(r"\d+-\d+", k) for k in coll.corpus)
    assert not coll.queries
    with_titles = shared.load_reuters_paragraphs(include_titles=True)
    assert len(with_titles.corpus) > 100_000


def test_qqp_pairs_and_questions() -> None:
    full = shared.load_qqp_pairs()
    assert len(full) == 80854 and sum(p.label for p in full) == 30141
    assert len(shared.load_qqp_pairs("positive")) == 30141
    assert len(shared.load_qqp_pairs("mock")) == 999
    qs = shared.load_qqp_questions()
    assert len(qs.corpus) == 137551
    assert qs.corpus["q0"] == full[0].text_a and qs.corpus["q1"] == full[0].text_b
    with pytest.raises(ConfigError, match=r"which.*received 'all'"):
        shared.load_qqp_pairs("all")  # type: ignore[arg-type]
