"""rwb tune rerank (small real Cranfield run) -> rwb export --engine rerank -> rwb verify: the
chosen depth, first stage, reranker, router threshold + unit and evidence round-trip; a tampered
evidence value fails verify (exit 1); bad input errors name the file/field (exit 2)."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from retrieval.cli import main
from retrieval.errors import DataError

pytestmark = [pytest.mark.slow, pytest.mark.model]  # the dense first stage embeds

SPEC = {
    "dataset": "cranfield",
    "name": "cran-export",
    "max_queries": 24,
    "depths": [5, 10],  # no depth 0, so the chosen depth always reranks (verify scores)
    "latency": {"sample_queries": 1, "warmup": 0},
    "router": {"quantiles": 4},
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from retrieval.loaders.shared import shared_folder
    from retrieval.rerank.run import run_rerank_sweep
    from retrieval.rerank.spec import parse_rerank_spec

    try:
        shared_folder("cranfield")
    except DataError as exc:
        pytest.skip(f"Cranfield data folder absent: {exc}")
    out = tmp_path_factory.mktemp("rerank-export") / "run"
    run_rerank_sweep(parse_rerank_spec(SPEC, source="test"), out)
    return out


@pytest.fixture(scope="module")
def exported(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("rerank-export-file") / "cran-rerank.yaml"
    assert main(["export", str(run_dir), "--engine", "rerank", "--out", str(out)]) == 0
    return out


def test_export_fields(exported, run_dir):
    doc = yaml.safe_load(exported.read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert doc["kind"] == "rerank-depth" and doc["engine"] == "rerank"
    assert doc["rwb_export"] == 1 and "format" not in doc  # one header for every export
    verdict = doc["router"]["heldout_verdict"]
    held = summary["router"]["heldout"]
    # issue 34: the router is recommended only when it does not lose on the held-out queries
    assert verdict["loses"] == (held["chosen"]["quality"] < held["never"]["quality"]
                                - summary["router"]["tolerance"])
    if verdict["loses"]:
        assert doc["use"].startswith("rerank: ") and "not the router" in doc["use"]
    else:
        assert doc["use"].startswith("router: ") and "rerank.depth" in doc["use"]
    assert doc["rerank"]["depth"] == summary["chosen_depth"] in (5, 10)
    assert doc["first_stage"]["kind"] == "bm25"
    assert doc["first_stage"]["bm25"]["implementation"] == "rank-bm25"
    assert doc["reranker"]["kind"] == "bi-encoder" and "minilm" in doc["reranker"]["model"]
    assert doc["router"]["threshold"] == summary["router"]["threshold"]
    assert doc["router"]["threshold_unit"].startswith("cosine similarity")
    ev = doc["evidence"]
    assert ev["selection"]["tolerance"] == summary["tolerance"]
    assert ev["ndcg@10"]["chosen"]["heldout"] == summary["chosen"]["heldout"]["ndcg@10"]
    assert ev["best_depth"] == summary["best_depth"]
    assert ev["ndcg@10"]["best"]["tuning"] >= ev["ndcg@10"]["chosen"]["tuning"]
    assert ev["latency_ms"]["p95_ms"] >= ev["latency_ms"]["p50_ms"] > 0
    assert ev["dataset"]["fingerprint"] == summary["dataset_fingerprint"]
    assert ev["dataset"]["collection"] == "cranfield"
    assert ev["versions"]["rwb"] and ev["run_id"] == "run"
    assert doc["source"]["spec"]["max_queries"] == 24


def test_verify_round_trip_holds(exported, capsys):
    assert main(["verify", str(exported), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["holds"] is True
    rec = yaml.safe_load(exported.read_text())["evidence"]["ndcg@10"]["chosen"]["heldout"]
    assert report["measured"]["ndcg@10"] == pytest.approx(rec, abs=1e-6)
    assert report["measured"]["heldout_queries"] == 12


def test_verify_tampered_evidence_fails(exported, tmp_path, capsys):
    doc = yaml.safe_load(exported.read_text())
    doc["evidence"]["ndcg@10"]["chosen"]["heldout"] = 0.05
    bad = tmp_path / "tampered.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert main(["verify", str(bad)]) == 1
    assert "FAILS" in capsys.readouterr().out


def test_verify_missing_field_is_one_line_error(exported, tmp_path, capsys):
    doc = yaml.safe_load(exported.read_text())
    del doc["source"]
    bad = tmp_path / "nosource.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert main(["verify", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "field 'source' is missing" in err and str(bad) in err and "\n" not in err


def test_verify_changed_dataset_fingerprint_errors(exported, tmp_path, capsys):
    doc = yaml.safe_load(exported.read_text())
    doc["evidence"]["dataset"]["fingerprint"] = "0000000000000000"
    bad = tmp_path / "otherdata.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert main(["verify", str(bad)]) == 2
    assert "dataset changed" in capsys.readouterr().err


def test_export_without_chosen_depth_errors(run_dir, tmp_path, capsys):
    copy = tmp_path / "nodepth"
    shutil.copytree(run_dir, copy)
    summary = json.loads((copy / "summary.json").read_text())
    summary["chosen_depth"] = None
    (copy / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "x.yaml"
    assert main(["export", str(copy), "--engine", "rerank", "--out", str(out)]) == 1
    assert "no chosen_depth" in capsys.readouterr().err
    assert not out.exists()


def test_export_wrong_engine_for_rerank_run(run_dir, tmp_path, capsys):
    assert main(["export", str(run_dir), "--engine", "milvus",
                 "--out", str(tmp_path / "m.yaml")]) == 2
    assert "--engine rerank" in capsys.readouterr().err
