"""A missing embedding chunk reuses the rows other stored chunks hold for the same texts (same
model, same cache tag) and embeds only the rest: a cut of a corpus embedded before costs no
model call (what lets the test suite embed each shared corpus once)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.embed import CachedEmbedder

pytestmark = pytest.mark.model  # CachedEmbedder.embed (a fake inner model; the guard counts it)


class Counting:
    """A fake model: records each call's texts; a text's vector is derived from its content."""

    dim = 4

    def __init__(self, model_id: str = "fake-rows", tag: str = "") -> None:
        self.model_id = model_id
        self.cache_tag = tag
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0 / (1 + len(t)), 3.0]
                         for t in texts], dtype=np.float32)


TEXTS = [f"document number {i} " + "x" * i for i in range(12)]


def test_a_cut_reuses_stored_rows_and_embeds_only_new_texts(tmp_path: Path) -> None:
    model = Counting()
    whole = CachedEmbedder(model, tmp_path).embed(TEXTS)  # type: ignore[arg-type]
    assert model.calls == [TEXTS]
    assert len(list(tmp_path.glob("*.rows"))) == 1
    cut = [TEXTS[7], TEXTS[2], "a new text", TEXTS[11], TEXTS[2], "another new one"]
    emb = CachedEmbedder(model, tmp_path)  # type: ignore[arg-type]
    got = emb.embed(cut)
    assert model.calls[1:] == [["a new text", "another new one"]]  # only the unseen texts
    assert emb.reused_rows == 4 and emb.misses == 1
    np.testing.assert_array_equal(got[[0, 1, 3, 4]], whole[[7, 2, 11, 2]])  # the stored bits
    np.testing.assert_array_equal(got[[2, 5]], model.embed(["a new text", "another new one"]))
    # the cut is a chunk of its own now: asked again, a plain hit
    again = CachedEmbedder(model, tmp_path)  # type: ignore[arg-type]
    np.testing.assert_array_equal(again.embed(cut), got)
    assert (again.hits, again.misses, again.reused_rows) == (1, 0, 0)


def test_a_cut_of_stored_texts_calls_no_model(tmp_path: Path) -> None:
    model = Counting()
    CachedEmbedder(model, tmp_path, chunk_size=5).embed(TEXTS)  # type: ignore[arg-type]
    assert len(model.calls) == 3  # chunks of 5, 5, 2
    emb = CachedEmbedder(model, tmp_path)  # type: ignore[arg-type]
    got = emb.embed(TEXTS[::-1])  # rows from three chunks, reordered
    assert len(model.calls) == 3 and emb.reused_rows == 12
    assert (emb.hits, emb.misses) == (1, 0)  # nothing computed: counted as a hit
    np.testing.assert_array_equal(got, Counting().embed(TEXTS[::-1]))


@pytest.mark.parametrize("other", [Counting("another-model"), Counting("fake-rows", "norm=0")],
                         ids=["model_id", "cache_tag"])
def test_rows_of_another_model_or_tag_are_not_reused(tmp_path: Path, other: Counting) -> None:
    CachedEmbedder(Counting(), tmp_path).embed(TEXTS)  # type: ignore[arg-type]
    emb = CachedEmbedder(other, tmp_path)  # type: ignore[arg-type]
    emb.embed(TEXTS[:3])
    assert other.calls == [TEXTS[:3]] and emb.reused_rows == 0


def test_unreadable_digests_or_a_missing_chunk_are_embedded_again(tmp_path: Path) -> None:
    model = Counting()
    CachedEmbedder(model, tmp_path).embed(TEXTS)  # type: ignore[arg-type]
    rows = next(tmp_path.glob("*.rows"))
    rows.write_bytes(b"not a numpy file")
    emb = CachedEmbedder(model, tmp_path)  # type: ignore[arg-type]
    emb.embed(TEXTS[:3])
    assert model.calls[-1] == TEXTS[:3] and emb.reused_rows == 0
    # digests whose chunk was deleted: embedded, not read from nowhere
    CachedEmbedder(model, tmp_path).embed(TEXTS[3:9])  # type: ignore[arg-type]
    for f in tmp_path.glob("*.npy"):
        f.unlink()
    emb = CachedEmbedder(model, tmp_path)  # type: ignore[arg-type]
    emb.embed(TEXTS[4:6])
    assert model.calls[-1] == TEXTS[4:6] and emb.reused_rows == 0
