"""The engines' own hybrid search and sparse index, reached through their descriptors (no model:
a small seeded text corpus with random unit vectors). The sparse index's inner products are
bm25s' BM25 scores; each engine's hybrid export form, run by that engine's client, fuses in the
order rwb's reference fusion computes (RRF everywhere, DBSF on Qdrant)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.fusion_tune.fuse import Candidate, fuse, leg_table, top_k
from retrieval.indexes.engine import get_engine, hybrid_engines, sparse_engines
from retrieval.indexes.hybrid import HybridCollection
from retrieval.rerank.bm25 import BM25Index, BM25Params

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
         "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber",
         "basil", "cedar", "dune"]


@pytest.fixture(scope="module")
def coll() -> HybridCollection:
    rng = np.random.default_rng(11)
    # distinct lengths: no two documents tie on a query's BM25 score (ties may swap in engines)
    texts = [" ".join(rng.choice(WORDS, size=int(n))) for n in rng.permutation(range(4, 64))]
    texts[7] = "   "  # a blank document: not indexed, never a candidate
    queries = [" ".join(rng.choice(WORDS, size=3, replace=False)) for _ in range(12)]
    bm = BM25Index(BM25Params(implementation="bm25s", method="lucene", k1=1.2, b=0.75))
    bm.build(texts)
    dense = rng.normal(size=(len(texts), 16)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    qd = rng.normal(size=(len(queries), 16)).astype(np.float32)
    qd /= np.linalg.norm(qd, axis=1, keepdims=True)
    return HybridCollection(keep=[i for i, t in enumerate(texts) if t.strip()], dense=dense,
                            sparse=bm.doc_weights(), texts=texts, query_dense=qd,
                            query_sparse=bm.query_terms(queries), query_texts=queries)


def _bm25(coll: HybridCollection) -> BM25Index:
    return BM25Index(BM25Params(implementation="bm25s", method="lucene", k1=1.2,
                                b=0.75)).build(list(coll.texts))


def test_sparse_weights_are_bm25s_scores(coll: HybridCollection) -> None:
    bm = _bm25(coll)
    for i, q in enumerate(coll.query_texts):
        np.testing.assert_allclose(coll.bm25_scores(i), bm.scores(q), rtol=1e-6, atol=1e-9)
    assert coll.sparse[7] == {}


@pytest.mark.parametrize("engine", ["qdrant", "milvus"])
def test_sparse_index_scores_equal_bm25(engine: str, coll: HybridCollection,
                                        tmp_path: Path) -> None:
    assert engine in sparse_engines()
    bm = _bm25(coll)
    index = sparse_engines()[engine](tmp_path)
    try:
        index.add(coll.sparse)
        for i, q in enumerate(coll.query_texts):
            ids, scores = index.search(coll.query_sparse[i], 20)
            want = bm.scores(q)
            assert len(ids) == min(20, int(np.count_nonzero(want > 0)))
            np.testing.assert_allclose(scores, want[ids], rtol=1e-5)  # float32 in the engine
            top = np.sort(want)[::-1][: len(ids)]
            np.testing.assert_allclose(scores, top, rtol=1e-5)  # the same ranking by score
            assert 7 not in ids.tolist()
    finally:
        index.close()


def test_sparse_stage_ranks_as_the_bm25_leg(coll: HybridCollection) -> None:
    from retrieval.fusion_tune.sparse import SparseStage
    from retrieval.rerank.firststage import BM25Stage

    bm25 = BM25Stage(BM25Params(implementation="bm25s", method="lucene", k1=1.2, b=0.75))
    bm25.build(list(coll.texts))
    stage = SparseStage("qdrant", bm25.index)
    try:
        stage.build()
        got = stage.search(list(coll.query_texts), 10)
        folder = stage._dir
    finally:
        stage.close()
    assert not folder.exists()  # the stage removes the folder it created
    want = bm25.search(list(coll.query_texts), 10)
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5)
    assert (got.doc_idx == want.doc_idx).mean() > 0.9  # only near-ties may swap


def _legs(coll: HybridCollection, depth: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    keep = np.asarray(coll.keep)
    sims = coll.query_dense @ coll.dense[keep].T
    order = np.argsort(-sims, axis=1, kind="stable")[:, :depth]
    dense = (keep[order], np.take_along_axis(sims, order, axis=1).astype(np.float64))
    bm_ids = np.full((len(coll.query_texts), depth), -1, dtype=np.int64)
    bm_sc = np.full((len(coll.query_texts), depth), -np.inf)
    for i in range(len(coll.query_texts)):
        s = coll.bm25_scores(i)
        top = np.argsort(-s, kind="stable")[:depth]
        top = top[s[top] > 0]
        bm_ids[i, : len(top)], bm_sc[i, : len(top)] = top, s[top]
    return {"dense": dense, "bm25": (bm_ids, bm_sc)}


CASES = [(e, Candidate("rrf", (1.0, 1.0), (10, 20), rrf_k=20))
         for e, h in sorted(hybrid_engines().items()) if h.run is not None]
assert [e for e, _ in CASES] == ["lancedb", "milvus", "qdrant"]  # an engine lost is a failure
CASES.append(("qdrant", Candidate("convex", (0.5, 0.5), (20, 20), normalisation="dbsf")))


@pytest.mark.parametrize(("engine", "cand"), CASES, ids=lambda v: getattr(v, "label", v))
def test_engine_runs_its_hybrid_form(engine: str, cand: Candidate, coll: HybridCollection,
                                     tmp_path: Path) -> None:
    hybrid = hybrid_engines()[engine]
    params: dict[str, Any] = cand.params()
    assert hybrid.expressible(cand.method, params)
    assert not hybrid.expressible("rrf", {**params, "weights": {"dense": 0.7, "bm25": 0.3}})
    form = hybrid.form(cand.method, params, "cosine")
    assert hybrid.run is not None
    got = hybrid.run(form, coll, tmp_path)
    table = leg_table(_legs(coll, 20))
    fused = fuse(table, cand)
    want, _ = top_k(table, fused, form["limit"])
    score = {}
    for i in range(len(got)):
        score = dict(zip(table.doc_idx[i].tolist(), fused[i].tolist()))
        ref = [d for d in want[i].tolist() if d >= 0]
        assert len(got[i]) == len(ref)
        # the same fused scores in the same order (an engine may order exact ties otherwise)
        np.testing.assert_allclose([score[d] for d in got[i]], [score[d] for d in ref],
                                   rtol=1e-5, atol=1e-6)


def test_redis_export_is_refused_with_the_reason() -> None:
    from retrieval.errors import ConfigError
    from retrieval.exporting.fusion import hybrid_form

    cand = Candidate("rrf", (1.0, 1.0), (10, 20), rrf_k=20)
    with pytest.raises(ConfigError, match=r"--engine redis: .*FT\.HYBRID.*--engine "
                                          r"lancedb, milvus, qdrant"):
        hybrid_form("redis", cand, "cosine")


@pytest.mark.services
def test_the_redis_here_has_no_ft_hybrid(redis_url: str) -> None:
    """The reason the Redis export is refused; when this fails, the module here takes
    FT.HYBRID: write the export (engines/redis/hybrid.py) and load it in a test."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        with pytest.raises(redis.ResponseError, match="unknown command"):
            client.execute_command("FT.HYBRID", "rwb-no-index", "SEARCH", "x", "VSIM", "@v",
                                   "$v")
    finally:
        client.close()


@pytest.mark.services
def test_pgvector_sparsevec_scores_equal_bm25(coll: HybridCollection, pg_url: str,
                                              tmp_path: Path) -> None:
    import psycopg

    assert "pgvector" in sparse_engines()
    bm = _bm25(coll)
    from retrieval.engines.pgvector.sparse import PgSparse

    assert get_engine("pgvector").sparse is PgSparse
    index = PgSparse(tmp_path)
    table = index.table
    try:
        index.add(coll.sparse)
        for i, q in enumerate(coll.query_texts):
            ids, scores = index.search(coll.query_sparse[i], 20)
            want = bm.scores(q)
            assert len(ids) == min(20, int(np.count_nonzero(want > 0)))
            np.testing.assert_allclose(scores, want[ids], rtol=1e-5)  # float32 in sparsevec
            np.testing.assert_allclose(scores, np.sort(want)[::-1][: len(ids)], rtol=1e-5)
    finally:
        index.close()
    with psycopg.connect(pg_url) as conn:  # the table it created is gone
        row = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        assert row is not None and row[0] is None
