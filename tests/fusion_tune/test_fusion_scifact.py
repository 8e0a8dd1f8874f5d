"""`rwb tune fusion` on SciFact (../shared/data, BEIR test claims).

Kept cheap: embedding the 5,183 abstracts takes minutes on two cores, so the tune runs on a
seeded cut (60 judged claims, 600 abstracts); the BM25 leg's pinned convention is checked on the
whole collection (no model: bm25s lucene over all 300 claims gives 0.679, the reference figure
of /work/shared/ENVIRONMENT.md). The dense leg's whole-collection figure (MiniLM 0.6451) is
checked by tests/embed/test_embed.py and test_rerank_golden.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.data import TextCollection
from retrieval.errors import DataError

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def scifact() -> TextCollection:
    from retrieval.loaders.shared import load_scifact

    try:
        return load_scifact("test")
    except DataError as exc:
        pytest.skip(f"SciFact data folder absent: {exc}")


@pytest.fixture(scope="module")
def summary(scifact: TextCollection,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from retrieval.api import tune_fusion
    from retrieval.testing.byo import write_beir

    base = tmp_path_factory.mktemp("sf")
    folder = write_beir(scifact, base / "beir", n_queries=60, n_docs=600, seed=1)
    spec = {"name": "sf-fusion", "dataset": f"beir:{folder}", "resamples": 2000,
            "latency": {"sample_queries": 5},
            "fusion": {"methods": ["rrf", "convex"], "normalisations": ["min-max", "dbsf"],
                       "weights": [0.3, 0.5, 0.7], "rrf_k": [20, 60], "depths": [20, 100]}}
    return tune_fusion(spec, out=base / "run").to_dict(), base / "run"


def test_bm25_leg_reproduces_the_reference_figure(scifact: TextCollection) -> None:
    from retrieval.fusion_tune.spec import parse_fusion_spec
    from retrieval.rerank.firststage import BM25Stage
    from retrieval.stats.irmetrics import evaluate_rankings

    spec = parse_fusion_spec({"dataset": "scifact"})  # the fusion spec's default BM25 leg
    ids = list(scifact.corpus)
    stage = BM25Stage(spec.bm25)
    stage.build([scifact.corpus[d] for d in ids])
    qids = [q for q in scifact.queries if scifact.qrels.get(q)]
    assert len(qids) == 300
    hits = stage.search([scifact.queries[q] for q in qids], 10)
    ranked = {q: [ids[j] for j in row if j >= 0] for q, row in zip(qids, hits.doc_idx)}
    got = evaluate_rankings(scifact.qrels, ranked, ["ndcg@10"], query_ids=qids).means["ndcg@10"]
    assert got == pytest.approx(0.679, abs=0.003)


def test_tune_on_a_cut(summary: tuple[dict, Path]) -> None:
    s, _ = summary
    assert s["n_queries"] == 60 and s["n_docs"] == 600
    assert s["n_dev"] + s["n_test"] == 60
    for leg in ("dense", "bm25"):  # both legs are useful on SciFact claims
        assert 0.4 < s["baselines"][leg]["test"] <= 1.0
    assert s["chosen"]["dev"] == max(c["dev"] for c in s["candidates"])


def test_fused_test_ndcg_is_ranx_on_the_file(summary: tuple[dict, Path]) -> None:
    from ranx import Qrels, Run, evaluate

    s, out = summary
    qrels = Qrels.from_file(str(out / "qrels.test.trec"), kind="trec")
    run = Run.from_file(str(out / "fused.test.trec"), kind="trec")
    got = evaluate(qrels, run, "ndcg@10", make_comparable=True)
    assert got == pytest.approx(s["chosen"]["test"], abs=1e-12)
    assert s["chosen"]["significant"] == (s["chosen"]["p_value"] < 0.05
                                          and s["chosen"]["vs_rrf60"]["mean_diff"] > 0)
