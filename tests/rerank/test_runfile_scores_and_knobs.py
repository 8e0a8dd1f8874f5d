"""TREC run files carry the stage's real scores (score order = rank order, so ranx's min-max +
CombSUM fusion works); ranx Qrels/Run from pandas 3 frames; the engine-neutral knob columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from retrieval.indexes.knobs import knob_columns
from retrieval.loaders.trec import read_run, write_run
from retrieval.rerank.firststage import Candidates
from retrieval.rerank.run import staged_scores
from retrieval.rerank.tune import RerankScores, reranked_rankings

CORPUS = [f"d{i}" for i in range(6)]
QIDS = ["q1", "q2"]


def _stage() -> tuple[Candidates, RerankScores]:
    ids = np.array([[0, 1, 2, 3, 4], [5, 4, 3, -1, -1]], dtype=np.int64)
    fs = np.array([[9.0, 8.5, 8.0, 7.0, 6.0], [3.0, 2.0, 1.0, -np.inf, -np.inf]],
                  dtype=np.float32)
    rr = np.array([[0.1, 0.9, 0.5, np.nan, np.nan], [0.2, 0.8, 0.3, np.nan, np.nan]])
    return Candidates(ids, fs), RerankScores(depth=3, scores=rr[:, :3], call_ms=np.zeros(2))


def test_run_file_scores_are_the_stages_and_keep_the_rank_order(tmp_path):
    cands, rs = _stage()
    ranked, scores = staged_scores(cands, rs, 3, QIDS, CORPUS, k=5)
    assert ranked == reranked_rankings(cands, rs, 3, QIDS, CORPUS, k=5)
    assert scores["q1"][:3] == pytest.approx([0.9, 0.5, 0.1])  # the reranker's own scores
    tail = np.array(scores["q1"][3:])
    assert tail[0] < 0.1 and tail[0] - tail[1] == pytest.approx(1.0)  # first stage, shifted
    assert scores["q2"] == pytest.approx([0.8, 0.3, 0.2])
    first_ranked, first = staged_scores(cands, rs, 0, QIDS, CORPUS, k=5)
    assert first["q1"] == pytest.approx([9.0, 8.5, 8.0, 7.0, 6.0])  # not 5, 4, 3, ...
    path = write_run(tmp_path / "r.trec", ranked, "rwb", scores)
    back = read_run(path)  # read by score, as trec_eval / ranx do: the same order
    assert [d for d, _ in back["q1"]] == ranked["q1"]
    assert [s for _, s in back["q1"]][:3] == pytest.approx([0.9, 0.5, 0.1])
    plain = read_run(write_run(tmp_path / "p.trec", first_ranked, "rwb"))
    assert [s for _, s in plain["q1"]] == [5, 4, 3, 2, 1]  # no scores given: rank-derived


@pytest.mark.slow  # ranx compiles its numba kernels on first use
def test_ranx_fusion_of_the_written_runs(tmp_path):
    ranx = pytest.importorskip("ranx")
    from retrieval.stats.irmetrics import ranx_qrels, ranx_run

    cands, rs = _stage()
    r0, s0 = staged_scores(cands, rs, 0, QIDS, CORPUS, 5)
    r3, s3 = staged_scores(cands, rs, 3, QIDS, CORPUS, 5)
    a = ranx.Run.from_file(str(write_run(tmp_path / "a.trec", r0, "first", s0)), kind="trec")
    b = ranx.Run.from_file(str(write_run(tmp_path / "b.trec", r3, "rerank", s3)), kind="trec")
    fused = ranx.fuse(runs=[a, b], norm="min-max", method="sum")
    # min-max puts both runs on 0..1: d1 (first stage 2nd, reranker 1st) wins q1
    assert max(fused["q1"], key=fused["q1"].get) == "d1"
    frame = pd.DataFrame({"q_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "d4"],
                          "score": [1, 0, 2]})
    assert str(frame["q_id"].dtype) != "object"  # pandas 3: string columns
    with pytest.raises(AssertionError):
        ranx.Qrels.from_df(frame)  # why the helper exists
    qrels = ranx_qrels(frame)
    assert qrels.to_dict() == {"q1": {"d1": 1, "d2": 0}, "q2": {"d4": 2}}
    run = ranx_run(frame.rename(columns={"q_id": "query_id"}).assign(score=[0.5, 0.2, 0.1]),
                   name="mine")
    assert run.name == "mine" and run.to_dict()["q1"] == {"d1": 0.5, "d2": 0.2}
    assert ranx.evaluate(qrels, fused, "ndcg@3") > 0


def test_knob_columns_are_engine_neutral():
    hnsw = knob_columns("hnswlib", {"M": 16}, {"ef_search": 32})
    assert hnsw == {"knob": "ef_search", "knob_native": "ef_search", "knob_value": 32}
    ivf = knob_columns("faiss-ivf", {"nlist": 8}, {"nprobe": 4, "k_factor": 1})
    assert ivf == {"knob": "nprobe", "knob_native": "nprobe", "knob_value": 4}
    assert knob_columns("faiss-flat", {}, {})["knob"] is None
    assert knob_columns("no-such-backend", {}, {"ef": 3})["knob"] is None
    pytest.importorskip("pymilvus")
    milvus = knob_columns("milvus", {"index_type": "HNSW", "M": 16, "ef_construction": 64},
                          {"ef": 32})
    assert milvus == {"knob": "ef_search", "knob_native": "ef", "knob_value": 32}
