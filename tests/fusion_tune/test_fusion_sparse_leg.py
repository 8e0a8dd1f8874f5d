"""A three-leg `rwb tune fusion` end to end (dense MiniLM, bm25s, and the BM25 weights in
Qdrant's sparse index through qdrant-edge) on a 150-document cut of Cranfield: the sparse leg
ranks as the bm25 leg (same scores), it is tuned like the others (weights, depths, candidates),
its cost stands beside its gain, the TREC files agree with the summary, the Qdrant export holds
three prefetches and `rwb verify` re-measures it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from retrieval.cli import main
from retrieval.errors import DataError
from tests.helpers import cli_ok

pytestmark = [pytest.mark.model, pytest.mark.slow]



@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from retrieval.loaders.shared import load_cranfield
    from retrieval.testing.byo import write_beir

    try:
        coll = load_cranfield(relevance="gain")
    except DataError as exc:
        pytest.skip(f"Cranfield data folder absent: {exc}")
    base = tmp_path_factory.mktemp("fusion3")
    folder = write_beir(coll, base / "beir", n_queries=24, n_docs=150, seed=5)
    spec = base / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "fusion-3", "dataset": f"beir:{folder}", "resamples": 500, "run_depth": 20,
        "latency": {"sample_queries": 3}, "sparse": {"engine": "qdrant"},
        "fusion": {"methods": ["rrf", "convex"], "normalisations": ["dbsf"],
                   "weights": [0.5, 1.0], "rrf_k": [60], "depths": [10, 20]},
    }))
    out = base / "run"
    summary = json.loads(cli_ok("tune", "fusion", str(spec), "--out", str(out), "--json"))
    return {"summary": summary, "out": out}


def test_the_sparse_leg_is_tuned_like_the_others(tuned: dict[str, Any]) -> None:
    s = tuned["summary"]
    assert s["sparse"]["engine"] == "qdrant"
    assert set(s["legs"]) == {"dense", "bm25", "sparse"}
    assert len(s["candidates"]) == 7 * 8 * 2  # 7 weight triples x 2^3 depths x (rrf, dbsf)
    for c in s["candidates"]:
        assert set(c["params"]["weights"]) == set(c["params"]["depths"]) == set(s["legs"])
    assert any(c["params"]["weights"]["sparse"] > 0.4 for c in s["candidates"])
    assert {"rrf60", "dense", "bm25", "sparse"} <= set(s["baselines"])
    assert set(s["chosen"]["params"]["weights"]) == {"dense", "bm25", "sparse"}
    weights = s["chosen"]["params"]["weights"]
    for name, leg in s["legs"].items():
        assert leg["p95_ms"] > 0 and "without " + name in leg["gain_meaning"]
        if weights[name] == 0:  # a leg the chosen fusion does not use brings nothing
            assert leg["gain"] == 0.0
    # the same BM25 scores: the sparse leg ranks as the bm25 leg does (float32 near-ties aside)
    b = s["baselines"]
    assert b["sparse"]["test"] == pytest.approx(b["bm25"]["test"], abs=0.02)
    assert b["sparse"]["dev"] == pytest.approx(b["bm25"]["dev"], abs=0.02)


def test_trec_files_agree_with_the_summary(tuned: dict[str, Any]) -> None:
    from ranx import Qrels, Run, evaluate

    s, out = tuned["summary"], tuned["out"]
    assert s["trec_runs"]["sparse"] == "sparse.test.trec"
    qrels = Qrels.from_file(str(out / "qrels.test.trec"), kind="trec")
    for role, value in (("sparse", s["baselines"]["sparse"]["test"]),
                        ("fused", s["chosen"]["test"])):
        run = Run.from_file(str(out / s["trec_runs"][role]), kind="trec")
        got = evaluate(qrels, run, "ndcg@10", make_comparable=True)
        assert got == pytest.approx(value, abs=1e-12), role


def test_qdrant_export_has_three_prefetches_and_verify_holds(tuned: dict[str, Any],
                                                             tmp_path: Path) -> None:
    path = tmp_path / "qdrant.yaml"
    cli_ok("export", str(tuned["out"]), "--engine", "qdrant", "--out", str(path))
    doc = yaml.safe_load(path.read_text())
    assert [p["using"] for p in doc["hybrid"]["prefetch"]] == ["dense", "bm25", "bm25"]
    assert doc["legs"]["sparse"]["engine"] == "qdrant"
    assert "HOLDS" in cli_ok("verify", str(path))


def test_redis_export_is_one_line_exit_2(tuned: dict[str, Any], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "redis.yaml"
    assert main(["export", str(tuned["out"]), "--engine", "redis", "--out", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "FT.HYBRID" in err[0] and "--engine lancedb, milvus, qdrant" in err[0]
    assert not path.exists()
