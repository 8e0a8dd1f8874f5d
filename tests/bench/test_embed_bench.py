"""Embedding benchmark: batching plans, padding accounting, the batched-vs-single equality check
(on the real MiniLM), and bad inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.bench.embed.engines import STEngine, run_plan
from retrieval.bench.embed.plan import (
    check_agreement,
    drift,
    fixed_batches,
    make_plans,
    padding_waste,
    token_budget_batches,
)
from retrieval.bench.embed.run import run_embed_bench
from retrieval.bench.embed.spec import EmbedBenchConfig, load_embed_config
from retrieval.errors import ConfigError, DataError

TEXTS = [
    "How do I learn Python quickly?",
    "Why is the sky blue?",
    "What are the health benefits of drinking green tea every morning before breakfast?",
    "Is it safe?",
    "A much longer passage about vector databases, approximate nearest neighbour search and how "
    "HNSW graphs trade recall for latency when ef_search is lowered, with many more words here.",
    "How tall is Mount Everest?",
    "Best laptop for students?",
    "Can dogs eat chocolate, and if not, what should an owner do after an accident?",
]


def test_token_budget_batches_respect_budget() -> None:
    lengths = np.array([5, 50, 7, 200, 12, 9, 300, 6])
    batches = token_budget_batches(lengths, 64)
    assert sorted(i for b in batches for i in b) == list(range(8))
    for b in batches:
        padded = int(lengths[list(b)].max()) * len(b)
        assert padded <= 64 or len(b) == 1  # an over-long text travels alone
    # sorted: lengths never decrease across batches
    flat = [int(lengths[i]) for b in batches for i in b]
    assert flat == sorted(flat)


def test_padding_waste_counts_pad_tokens() -> None:
    lengths = np.array([2, 4, 4, 4])
    assert padding_waste(lengths, [(0, 1)]) == pytest.approx(1 - 6 / 8)
    assert padding_waste(lengths, fixed_batches(4, 1)) == 0.0
    assert padding_waste(lengths, [(1, 2, 3)]) == 0.0


def test_plans_cover_every_setting() -> None:
    cfg = EmbedBenchConfig(sample=10, batch_sizes=[1, 4], token_budgets=[32], single_limit=3)
    plans = make_plans(cfg, 10, np.arange(10) + 3)
    names = [p.setting for p in plans]
    assert names == ["single", "batch-4", "sorted-4", "tokens-32"]
    assert len(plans[0].batches) == 3  # single_limit
    for p in plans[1:]:
        assert sorted(i for b in p.batches for i in b) == list(range(10))


def test_check_agreement_flags_a_difference() -> None:
    rng = np.random.default_rng(0)
    single = rng.standard_normal((5, 8)).astype(np.float32)
    same = check_agreement(single, {"batch-8": single.copy()}, 1e-4)
    assert same.ok and same.max_abs_diff == 0.0
    off = single.copy()
    off[2, 3] += 3e-4
    bad = check_agreement(single, {"batch-8": single.copy(), "sorted-8": off}, 1e-4)
    assert not bad.ok and bad.worst_setting == "sorted-8"
    assert bad.max_abs_diff == pytest.approx(3e-4, rel=1e-3)
    assert "DISAGREE" in bad.message()


def test_drift_is_zero_for_identical_vectors() -> None:
    x = np.random.default_rng(1).standard_normal((40, 8)).astype(np.float32)
    d = drift(x, x, n_queries=5, k=3)
    assert d["cos_dist_max"] == pytest.approx(0.0, abs=1e-6)
    assert d["recall_at_k"] == 1.0


@pytest.fixture(scope="module")
def engine() -> STEngine:
    pytest.importorskip("sentence_transformers", reason="needs the [embed] extra")
    return STEngine(None)


@pytest.mark.model
def test_batched_equals_single_on_real_model(engine: STEngine) -> None:
    lengths = engine.token_lengths(TEXTS)
    cfg = EmbedBenchConfig(sample=len(TEXTS), batch_sizes=[1, 4], token_budgets=[64],
                           single_limit=None)
    runs = {p.setting: run_plan(engine, TEXTS, p) for p in make_plans(cfg, len(TEXTS), lengths)}
    single = runs.pop("single").embeddings
    check = check_agreement(single, {n: r.embeddings for n, r in runs.items()}, 1e-4)
    assert check.ok, check.message()
    # the padding measured from the attention masks equals the padding the plan predicts
    for r in runs.values():
        assert 1 - r.real_tokens / r.padded_tokens == pytest.approx(
            padding_waste(lengths, r.plan.batches))
    assert runs["sorted-4"].padded_tokens <= runs["batch-4"].padded_tokens


@pytest.mark.model
def test_bad_inputs(engine: STEngine, tmp_path: Path) -> None:
    cfg = EmbedBenchConfig(sample=2, batch_sizes=[1], token_budgets=[], dtypes=["fp32"])
    with pytest.raises(DataError, match="text 1 is empty"):
        run_embed_bench(cfg, texts=["fine", "  "])
    with pytest.raises(DataError, match="texts is empty"):
        run_embed_bench(cfg, texts=[])
    with pytest.raises(ConfigError, match="batch_sizes"):
        load_embed_config(None, batch_sizes=[8, 0])
    with pytest.raises(ConfigError, match="sample"):
        load_embed_config(None, sample=-1)
    missing = tmp_path / "no-model"
    with pytest.raises(DataError, match=f"looked in {missing}"):
        run_embed_bench(cfg.model_copy(update={"model": str(missing)}), texts=["a"])
    with pytest.raises(ConfigError, match="needs a local model folder"):
        run_embed_bench(cfg.model_copy(update={"engine": "flagembedding"}), texts=["a"])
    blank = tmp_path / "texts.txt"
    blank.write_text("one\n\nthree\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 2 is empty"):
        run_embed_bench(cfg.model_copy(update={"texts_file": str(blank)}))
    with pytest.raises(ConfigError, match=r"Did you mean .batch_sizes."):
        load_embed_config(None, batchsize=3)


@pytest.mark.model
def test_flagembedding_engine_matches_sentence_transformers(engine: STEngine) -> None:
    """FlagEmbedding's FlagModel on the same local folder, with MiniLM's mean pooling, gives
    the same vectors as sentence-transformers (so either engine can be benchmarked)."""
    pytest.importorskip("FlagEmbedding", reason="needs the [rag] extra")
    from retrieval.bench.embed.engines import FlagEngine

    flag = FlagEngine(str(engine.embedder.path), pooling="mean", max_seq_length=256)
    got, real, padded = flag.forward(TEXTS)
    ref, real_st, padded_st = engine.forward(TEXTS)
    assert flag.dim == 384 and (real, padded) == (real_st, padded_st)
    np.testing.assert_allclose(got, ref, atol=1e-5)


def test_interleaved_slices_cover_every_text_once() -> None:
    from retrieval.bench.embed.plan import slice_plans

    cfg = EmbedBenchConfig(sample=12, batch_sizes=[1, 4], token_budgets=[40], single_limit=4,
                           interleave=2)
    lengths = np.array([3, 9, 4, 12, 5, 6, 7, 30, 2, 8, 11, 10])
    seen: dict[str, list[int]] = {}
    for rows in np.array_split(np.arange(12), 2):
        for p in slice_plans(cfg, lengths, rows):
            for b in p.batches:
                assert set(b) <= set(rows.tolist())  # a batch never spans two slices
                seen.setdefault(p.setting, []).extend(b)
    assert len(seen["single"]) == 4  # the limit is shared between the slices
    for name in ("batch-4", "sorted-4", "tokens-40"):
        assert sorted(seen[name]) == list(range(12))
