"""Rerankers: the score contract, the bi-encoder with the real MiniLM, and the CrossEncoder /
FlagReranker plumbing with a tiny *randomly initialised* BERT saved to a temp folder (no real
cross-encoder weights ship on PyPI; its scores are meaningless, only shapes and calls are
checked)."""

from collections.abc import Sequence

import numpy as np
import pytest

from retrieval.embed import SentenceTransformerEmbedder
from retrieval.errors import BackendError, DataError
from retrieval.rerank.rerankers import (
    BiEncoderReranker,
    CrossEncoderReranker,
    FlagReranker,
    PrecomputedEmbedder,
    Reranker,
    resolve_reranker_model,
    score_passages,
)


class CountingReranker:
    """A fake beside the real ones: returns ``n + extra`` scores and counts calls."""

    def __init__(self, extra: int = 0, value: float = 1.0) -> None:
        self.extra = extra
        self.value = value
        self.calls = 0

    @property
    def name(self) -> str:
        return "counting"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return np.full(len(passages) + self.extra, self.value)


class CountingEmbedder:
    def __init__(self, inner):
        self.inner = inner
        self.texts = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts, batch_size=32):
        self.texts += len(texts)
        return self.inner.embed(texts, batch_size=batch_size)


@pytest.fixture(scope="module")
def minilm():
    return SentenceTransformerEmbedder()


def test_empty_candidates_return_empty_scores_without_a_model_call():
    r = CountingReranker()
    out = score_passages(r, "q", [])
    assert out.shape == (0,) and r.calls == 0


@pytest.mark.parametrize("extra", [1, -1])
def test_wrong_number_of_scores_is_a_backend_error_naming_the_reranker(extra):
    r = CountingReranker(extra=extra)
    with pytest.raises(BackendError) as exc:
        score_passages(r, "q", ["a", "b", "c"])
    msg = str(exc.value)
    assert "reranker 'counting'" in msg
    assert f"returned {3 + extra} scores for 3 passages; expected 3" in msg


def test_non_finite_scores_and_bad_passages_are_rejected():
    with pytest.raises(BackendError, match="non-finite score"):
        score_passages(CountingReranker(value=float("nan")), "q", ["a"])
    with pytest.raises(DataError, match="not a single string"):
        score_passages(CountingReranker(), "q", "abc")


@pytest.mark.model
def test_bi_encoder_reranker_prefers_the_relevant_passage(minilm):
    counting = CountingEmbedder(minilm)
    r = BiEncoderReranker(counting)
    assert isinstance(r, Reranker)
    s = score_passages(r, "treatment of lung cancer", [
        "The football match ended in a draw.",
        "Chemotherapy improves survival in non-small-cell lung carcinoma.",
    ])
    assert s.shape == (2,) and s[1] > s[0] and np.all(np.abs(s) <= 1.0 + 1e-6)
    before = counting.texts
    assert r.score("q", []).shape == (0,) and counting.texts == before  # no model call


@pytest.mark.model
def test_precomputed_embedder_reuses_known_vectors(minilm):
    texts = ["alpha particles", "beta decay"]
    known = dict(zip(texts, minilm.embed(texts)))
    counting = CountingEmbedder(minilm)
    pre = PrecomputedEmbedder(counting, known)
    out = pre.embed(["beta decay", "gamma rays", "alpha particles"])
    assert counting.texts == 1 and pre.hits == 2 and pre.misses == 1
    np.testing.assert_allclose(out[0], known["beta decay"])
    direct = BiEncoderReranker(minilm).score("decay", texts)
    via_table = BiEncoderReranker(pre).score("decay", texts)
    np.testing.assert_allclose(direct, via_table, atol=1e-5)


def test_missing_reranker_model_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        resolve_reranker_model(tmp_path / "nope")
    with pytest.raises(DataError, match="not in the offline Hugging Face cache"):
        resolve_reranker_model("no-such-org/no-such-reranker")
    (tmp_path / "file.bin").write_text("x")
    with pytest.raises(DataError, match="is a file"):
        CrossEncoderReranker(tmp_path / "file.bin")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from retrieval.testing.tiny_reranker import make_tiny_cross_encoder

    return make_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


@pytest.mark.slow
@pytest.mark.parametrize("cls", [CrossEncoderReranker, FlagReranker])
@pytest.mark.model
def test_cross_encoder_plumbing_with_a_tiny_random_model(cls, tiny_model):
    r = cls(tiny_model, batch_size=4)
    passages = [f"passage {i} about topic {i % 3}" for i in range(10)]
    full = score_passages(r, "topic 1", passages)
    assert full.shape == (10,) and np.isfinite(full).all()
    # pointwise: scoring a prefix gives the prefix of the scores (what the depth sweep relies on)
    np.testing.assert_allclose(score_passages(r, "topic 1", passages[:3]), full[:3], atol=1e-5)
    one = score_passages(r, "topic 1", passages[:1])  # FlagEmbedding returns a bare float here
    assert one.shape == (1,)
    assert r.score("topic 1", []).shape == (0,)
    assert r.name.startswith(("cross-encoder:", "flag:"))
