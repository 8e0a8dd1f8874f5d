"""`rwb tune fusion` on SciFact (../shared/data, BEIR test claims): both legs reproduce the
reference figures of /work/shared/ENVIRONMENT.md over all 300 claims (exact MiniLM nDCG@10
0.6451, bm25s lucene 0.679), and the fused test figure is ranx's on fused.test.trec."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.errors import DataError

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from retrieval.api import tune_fusion
    from retrieval.loaders.shared import load_scifact

    try:
        load_scifact("test")
    except DataError as exc:
        pytest.skip(f"SciFact data folder absent: {exc}")
    out = tmp_path_factory.mktemp("sf") / "run"
    spec = {"name": "sf-fusion", "dataset": "scifact", "resamples": 2000,
            "latency": {"sample_queries": 5},
            "fusion": {"methods": ["rrf", "convex"], "normalisations": ["min-max", "dbsf"],
                       "weights": [0.3, 0.5, 0.7], "rrf_k": [20, 60], "depths": [20, 100]}}
    return tune_fusion(spec, out=out).to_dict(), out


def test_legs_reproduce_the_reference_figures(summary: tuple[dict, Path]) -> None:
    s, _ = summary
    assert s["n_queries"] == 300

    def whole(leg: str) -> float:
        b = s["baselines"][leg]
        return (b["dev"] * s["n_dev"] + b["test"] * s["n_test"]) / s["n_queries"]

    assert whole("dense") == pytest.approx(0.6451, abs=0.003)
    assert whole("bm25") == pytest.approx(0.679, abs=0.003)


def test_fused_test_ndcg_is_ranx_on_the_file(summary: tuple[dict, Path]) -> None:
    from ranx import Qrels, Run, evaluate

    s, out = summary
    qrels = Qrels.from_file(str(out / "qrels.test.trec"), kind="trec")
    run = Run.from_file(str(out / "fused.test.trec"), kind="trec")
    got = evaluate(qrels, run, "ndcg@10", make_comparable=True)
    assert got == pytest.approx(s["chosen"]["test"], abs=1e-12)
    assert s["chosen"]["significant"] == (s["chosen"]["p_value"] < 0.05
                                          and s["chosen"]["vs_rrf60"]["mean_diff"] > 0)
