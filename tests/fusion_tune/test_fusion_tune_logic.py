"""`rwb tune fusion` logic (retrieval/fusion_tune): fusion and normalisation golden-tested against
retrieval.fusion / ranx / hand values, the paired randomisation test against scipy's, and a
synthetic collection whose BM25 leg is pure noise: the tuned fusion ends with "no significant
gain" over the best single leg."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.errors import ConfigError
from retrieval.fusion import rrf, rrf_ranx
from retrieval.fusion_tune.fuse import (
    Candidate,
    fuse,
    grid,
    leg_table,
    normalise,
    paired_test,
    rrf60,
    top_k,
)
from retrieval.fusion_tune.judge import Split, judge, ranx_per_query, scored_run
from retrieval.fusion_tune.spec import parse_fusion_spec
from retrieval.stats.irmetrics import RANX_KEY_WIDTH


def _legs(nq: int = 6, n_docs: int = 40, k: int = 12, seed: int = 0) -> dict[str, tuple]:
    rng = np.random.default_rng(seed)
    out = {}
    for leg in ("dense", "bm25"):
        ids = np.stack([rng.choice(n_docs, k, replace=False) for _ in range(nq)])
        sc = -np.sort(-rng.random((nq, k)), axis=1)
        ids[0, -2:] = -1  # a short row
        sc[0, -2:] = -np.inf
        out[leg] = (ids.astype(np.int64), sc.astype(np.float32))
    return out


def _key(i: int) -> str:
    # keys sort like positions (the two tie-breaks agree), as wide as the keys rwb hands ranx
    # (RANX_KEY_WIDTH): the ranx calls here reuse the functions make test compiled once
    return f"d{i:0{RANX_KEY_WIDTH - 1}d}"


def _lists(legs: dict[str, tuple], q: int, depths: dict[str, int]) -> dict[str, list]:
    return {leg: [(_key(int(d)), float(s)) for d, s in zip(ids[q], sc[q]) if d >= 0][:depths[leg]]
            for leg, (ids, sc) in legs.items()}


def test_weighted_rrf_equals_the_fusion_module() -> None:
    legs = _legs()
    table = leg_table(legs)
    cand = Candidate("rrf", (0.7, 0.3), (5, 9), rrf_k=20)
    docs, vals = top_k(table, fuse(table, cand), 10)
    for q in range(docs.shape[0]):
        want = rrf(_lists(legs, q, {"dense": 5, "bm25": 9}), 10, rrf_k=20,
                   weights={"dense": 0.7, "bm25": 0.3})
        got = [(_key(int(d)), float(v)) for d, v in zip(docs[q], vals[q]) if d >= 0]
        assert [d for d, _ in got] == [d for d, _ in want]
        np.testing.assert_allclose([v for _, v in got], [v for _, v in want], rtol=1e-12)


def test_rrf60_equals_ranx_fuse() -> None:
    legs = _legs(seed=3)
    table = leg_table(legs)
    docs, _ = top_k(table, fuse(table, rrf60(("dense", "bm25"), 12)), 10)
    runs = {leg: {str(q): _lists(legs, q, {"dense": 12, "bm25": 12})[leg]
                  for q in range(docs.shape[0])} for leg in legs}
    want = rrf_ranx(runs, 10, rrf_k=60)
    for q in range(docs.shape[0]):
        got = [_key(int(d)) for d in docs[q] if d >= 0]
        assert got == [d for d, _ in want[str(q)]]


def test_normalisations_hand_values() -> None:
    s = np.array([[4.0, 2.0, 1.0, 9.0], [3.0, 3.0, 0.0, 0.0]])
    present = np.array([[True, True, True, False], [True, True, False, False]])
    mm = normalise(s, present, "min-max")
    np.testing.assert_allclose(mm, [[1.0, 1 / 3, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    z = normalise(s, present, "z-score")
    mean, std = 7 / 3, np.std([4.0, 2.0, 1.0])
    np.testing.assert_allclose(z[0, :3], (np.array([4.0, 2.0, 1.0]) - mean) / std)
    assert z[0, 3] == 0.0 and (z[1] == 0.0).all()  # absent -> 0; std 0 -> 0
    dbsf = normalise(s, present, "dbsf")
    sd = np.std([4.0, 2.0, 1.0], ddof=1)  # Qdrant's DBSF: the sample std
    np.testing.assert_allclose(dbsf[0, :3], (np.array([4.0, 2.0, 1.0]) - (mean - 3 * sd))
                               / (6 * sd))
    np.testing.assert_allclose(dbsf[1], [0.5, 0.5, 0.0, 0.0])


def test_convex_min_max_equals_ranx_wsum() -> None:
    from ranx import Run
    from ranx import fuse as ranx_fuse

    legs = _legs(seed=5)
    table = leg_table(legs)
    cand = Candidate("convex", (0.6, 0.4), (12, 12), normalisation="min-max")
    docs, vals = top_k(table, fuse(table, cand), 12)
    runs = [Run({str(q): dict(_lists(legs, q, {"dense": 12, "bm25": 12})[leg])
                 for q in range(docs.shape[0])}) for leg in ("dense", "bm25")]
    fused = ranx_fuse(runs, norm="min-max", method="wsum", params={"weights": [0.6, 0.4]})
    for q in range(docs.shape[0]):
        want = fused.run[str(q)]
        for d, v in zip(docs[q], vals[q]):
            if d >= 0:
                assert v == pytest.approx(want[_key(int(d))], abs=1e-9)


def test_paired_test_agrees_with_scipy() -> None:
    from scipy import stats

    rng = np.random.default_rng(1)
    a = rng.random(60)
    b = a - 0.03 + rng.normal(0, 0.1, 60)
    ours = paired_test(a, b, resamples=20_000, seed=2)
    ref = stats.permutation_test((a, b), lambda x, y: np.mean(x - y), vectorized=False,
                                 permutation_type="samples", n_resamples=20_000,
                                 random_state=3)
    assert ours.p_value == pytest.approx(ref.pvalue, abs=0.02)
    assert ours.p_ttest == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert paired_test(a, a).p_value == 1.0
    big = paired_test(a + 0.5, a, resamples=999)
    assert big.p_value == pytest.approx(1 / 1000) and big.mean_diff == pytest.approx(0.5)


def _noise_case(nq: int = 160, n_docs: int = 400, seed: int = 0):
    """Dense ranks each query's 2 relevant docs somewhere in its top 12; BM25 is a random list."""
    rng = np.random.default_rng(seed)
    k = 50
    dense_ids = np.zeros((nq, k), dtype=np.int64)
    bm_ids = np.zeros((nq, k), dtype=np.int64)
    qrels: dict[str, dict[str, int]] = {}
    for i in range(nq):
        rel = rng.choice(n_docs, 2, replace=False)
        rest = rng.permutation(np.setdiff1d(np.arange(n_docs), rel))[: k - 2]
        row = list(rest)
        for r in rel:
            row.insert(int(rng.integers(0, 12)), int(r))
        dense_ids[i] = row[:k]
        bm_ids[i] = rng.choice(n_docs, k, replace=False)
        qrels[f"q{i}"] = {f"doc{int(r)}": 1 for r in rel}
    dense_sc = -np.sort(-rng.random((nq, k)), axis=1).astype(np.float32)
    bm_sc = -np.sort(-rng.random((nq, k)) * 10, axis=1).astype(np.float32)
    legs = {"dense": (dense_ids, dense_sc), "bm25": (bm_ids, bm_sc)}
    qids = [f"q{i}" for i in range(nq)]
    split = Split(qrels, qids, [f"doc{j}" for j in range(n_docs)], qids[::2], qids[1::2])
    return legs, split


def test_noise_leg_ends_with_no_significant_gain() -> None:
    legs, split = _noise_case()
    table = leg_table(legs)
    cands = grid(["rrf", "convex"], ["min-max", "dbsf"], [0.3, 0.6, 0.9], [20, 60], [10, 50])
    j = judge(table, split, cands, leg_runs=legs, run_depth=50, rrf_depth=50,
              resamples=2000)
    assert j.best_leg == "dense"
    assert not j.significant_vs_leg
    assert "no significant gain over the best single leg dense" in j.verdict("ndcg@10")
    assert j.test["dense"] > j.test["bm25"] + 0.2  # the noise leg is worthless
    # the test figures are ranx's on the runs as written
    for role, run in j.runs.items():
        assert ranx_per_query({q: split.qrels[q] for q in split.test}, run,
                              "ndcg@10") == j.per_query[role]


def test_scored_run_rounds_like_the_trec_file() -> None:
    ranked, scores = scored_run(np.array([[2, 0, -1]]), np.array([[0.123456789123, 0.1, -np.inf]]),
                                ["q"], ["a", "b", "c"])
    assert ranked == {"q": ["c", "a"]} and scores == {"q": [0.123456789, 0.1]}


def test_spec_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"fusion\.weights"):
        parse_fusion_spec({"dataset": "scifact", "fusion": {"weights": [1.5]}})
    with pytest.raises(ConfigError, match=r"fusion\.depths"):
        parse_fusion_spec({"dataset": "scifact", "fusion": {"depths": [5]}})
    with pytest.raises(ConfigError, match="dataset"):
        parse_fusion_spec({"dataset": "nope"})
    spec = parse_fusion_spec({"dataset": "scifact"})
    assert spec.fetch_k == 100 and spec.bm25.implementation == "bm25s"


def test_cli_registers_tune_fusion() -> None:
    from retrieval.cli import build_parser

    args = build_parser().parse_args(["tune", "fusion", "s.yaml", "--out", "d", "--json"])
    assert args.func.__module__ == "retrieval.cli.tune_fusion" and args.json


def test_export_picks_what_each_engine_runs_exactly() -> None:
    from retrieval.exporting.fusion import expressible, hybrid_form

    weighted = Candidate("rrf", (0.7, 0.3), (10, 50), rrf_k=20)
    equal = Candidate("rrf", (0.5, 0.5), (10, 50), rrf_k=20)
    dbsf = Candidate("convex", (0.5, 0.5), (20, 20), normalisation="dbsf")
    assert [expressible(e, weighted) for e in ("milvus", "qdrant", "lancedb")] == [False] * 3
    assert [expressible(e, equal) for e in ("milvus", "qdrant", "lancedb")] == [True] * 3
    assert expressible("qdrant", dbsf) and not expressible("milvus", dbsf)
    assert hybrid_form("qdrant", equal, "cosine")["query"]["k"] == 21  # Qdrant ranks from 0
    assert hybrid_form("milvus", equal, "cosine")["ranker"] == {"strategy": "rrf",
                                                                "params": {"k": 20}}
    assert hybrid_form("lancedb", equal, "cosine")["reranker"]["params"] == {"K": 20}
