"""``rwb export RUN --churn CHURN_RUN`` (issue 22, item 6): the exported evidence says whether
the chosen config holds under a runbook (runbook name, last step's recall / control / damage,
the target held at every search step); ``rwb verify`` shows it without re-running the churn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retrieval.churn.run import run_churn
from retrieval.churn.spec import parse_churn_spec
from retrieval.cli import main
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytest.importorskip("hnswlib")

DATA = {"kind": "synthetic", "n": 1200, "dim": 16, "n_queries": 40, "metric": "l2", "seed": 0}
BUILD = {"M": 8, "ef_construction": 40}
STEPS: list[dict[str, Any]] = [
    {"insert": {"start": 0, "end": 800}},
    {"search": {}},
    {"replace": {"start": 800, "end": 950, "old_start": 0, "old_end": 150}},
    {"delete": {"start": 150, "end": 300}},
    {"search": {}},
]


def _churn(out: Path, configs: list[dict[str, Any]], data: dict[str, Any] = DATA) -> Path:
    run_churn(parse_churn_spec({
        "name": "t", "dataset": data, "k": 10, "queries": 40, "warmup": 0, "write_batch": 256,
        "target_recall": 0.8, "retune": False, "probe_maintain": False,
        "confidence": {"method": "binomial"}, "configs": configs,
        "runbook": {"steps": STEPS}}, source="<test>"), out=out)
    return out


def test_export_carries_churn_evidence_and_verify_shows_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = run_sweep(parse_spec({
        "name": "s", "dataset": DATA, "k": 10, "target_recall": 0.8, "warmup": 0,
        "batch_repeats": 1, "modes": ["batch"], "tune": {"objective": "qps"},
        "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "hnswlib", "build": BUILD, "search": {"ef_search": [10, 40]}}],
    }, source="s.yaml"), tmp_path / "sweep")
    chosen = sweep.summary["backends"]["hnswlib"]["chosen"]["search"]
    churn = _churn(tmp_path / "churn", [
        {"backend": "faiss-flat", "label": "flat"},
        {"backend": "hnswlib", "label": "mine", "build": BUILD, "search": chosen}])
    out = tmp_path / "hnswlib.yaml"
    assert main(["export", str(tmp_path / "sweep"), "--engine", "hnswlib", "--out", str(out),
                 "--churn", str(churn), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    uc = info["under_churn"]
    steps = [s for s in json.loads((churn / "summary.json").read_text())["configs"][1]["steps"]
             if s["op"] == "search"]
    assert uc["runbook"] == "t (inline)" and uc["config_label"] == "mine"
    assert uc["search_steps"] == 2 and uc["last_search_step"]["step"] == 4
    assert uc["held_at_every_search_step"] == all(s["recall_lower"] >= 0.8 for s in steps)
    assert uc["last_search_step"]["recall"] == pytest.approx(steps[-1]["recall"], rel=1e-5)
    for key in ("control_recall", "damage"):
        assert key in uc["last_search_step"]
    assert main(["verify", str(out)]) == 0  # a seeded one-thread build: it holds
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if "under churn" in ln)
    assert "'t (inline)' (recorded, not re-run)" in line and "last step 4: recall" in line


def test_churn_run_of_another_config_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_sweep(parse_spec({
        "name": "s", "dataset": DATA, "k": 10, "target_recall": 0.8, "warmup": 0,
        "batch_repeats": 1, "modes": ["batch"], "tune": {"objective": "qps"},
        "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "faiss-flat"}],
    }, source="s.yaml"), tmp_path / "sweep")
    churn = _churn(tmp_path / "churn", [{"backend": "hnswlib", "build": BUILD,
                                         "search": {"ef_search": 10}}])
    out = tmp_path / "flat.yaml"
    assert main(["export", str(tmp_path / "sweep"), "--engine", "faiss", "--out", str(out),
                 "--churn", str(churn)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no config of this churn run is the exported one" in err
    assert main(["export", str(tmp_path / "sweep"), "--engine", "faiss", "--out", str(out),
                 "--churn", str(tmp_path / "sweep")]) == 2  # a sweep is not a churn run
    assert "not a rwb bench churn run" in capsys.readouterr().err


def test_churn_run_on_other_data_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34 HIGH 2: "holds under churn" evidence only from a churn run on the data the
    config was tuned on (the churn run's data_fingerprint = evidence.dataset.fingerprint)."""
    run_sweep(parse_spec({
        "name": "s", "dataset": DATA, "k": 10, "target_recall": 0.8, "warmup": 0,
        "batch_repeats": 1, "modes": ["batch"], "tune": {"objective": "qps"},
        "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "faiss-flat"}],
    }, source="s.yaml"), tmp_path / "sweep")
    churn = _churn(tmp_path / "churn", [{"backend": "faiss-flat"}], data={**DATA, "seed": 1})
    out = tmp_path / "flat.yaml"
    assert main(["export", str(tmp_path / "sweep"), "--engine", "faiss", "--out", str(out),
                 "--churn", str(churn)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "measured other data" in err, err
    assert not out.exists()
    same = _churn(tmp_path / "same", [{"backend": "faiss-flat"}])
    assert main(["export", str(tmp_path / "sweep"), "--engine", "faiss", "--out", str(out),
                 "--churn", str(same), "--json"]) == 0
    uc = json.loads(capsys.readouterr().out)["under_churn"]
    assert uc["data_fingerprint"] == json.loads(
        (tmp_path / "sweep" / "summary.json").read_text())["dataset_fingerprint"]
