"""Runs started from a folder that holds the data, as a user runs them (issue 20 items 3 and 5):
the shell's ``PWD`` is that folder and the spec names the data by relative paths. A sweep killed
there resumes with the same ``--out``; its ANN export verifies from another folder; a config tuned
from in-memory arrays verifies when the data is given again (``dataset=`` / ``--dataset``), and
other data is refused in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import retrieval
from retrieval.cli import main
from retrieval.data import VectorDataset
from retrieval.errors import ConfigError, DataError

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

SWEEP = {
    "name": "cwd",
    "dataset": {"kind": "npy", "base": "data/base.npy", "queries": "data/queries.npy",
                "metric": "l2"},
    "k": 10, "warmup": 2, "batch_repeats": 1, "target_recall": 0.8,
    "indexes": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                 "search": {"ef_search": [10, 20]}}],
    "tune": {"strategy": "target", "search_range": {"ef_search": [10, 64]}},
}


def vectors(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((1500, 16)).astype(np.float32),
            rng.standard_normal((80, 16)).astype(np.float32))


@pytest.fixture
def data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path/work`` holding data/ and spec.yaml, entered as a shell does (cwd and PWD)."""
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    base, queries = vectors()
    np.save(work / "data" / "base.npy", base)
    np.save(work / "data" / "queries.npy", queries)
    (work / "spec.yaml").write_text(yaml.safe_dump(SWEEP))
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(tmp_path / "index-cache"))
    monkeypatch.chdir(work)
    monkeypatch.setenv("OLDPWD", os.environ.get("PWD", str(tmp_path)))
    monkeypatch.setenv("PWD", str(work))
    return work


KILL_AFTER_FIRST_UNIT = """
import os, signal, sys
import retrieval
def progress(done, total, what):
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 once a unit of the sweep is recorded
retrieval.sweep("spec.yaml", out="run", progress=progress)
"""


def test_a_killed_sweep_resumes_with_the_same_out(data_folder: Path) -> None:
    env = {**os.environ, "PWD": str(data_folder)}
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_FIRST_UNIT], cwd=data_folder,
                            env=env, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before = json.loads((data_folder / "run" / "manifest.json").read_text())
    assert before["status"] == "running"
    assert str(data_folder) in before["study"]["storage"]  # the cwd is no secret
    resumed = subprocess.run([sys.executable, "-m", "retrieval", "sweep", "spec.yaml", "--out",
                              "run"], cwd=data_folder, env=env, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    after = json.loads((data_folder / "run" / "manifest.json").read_text())
    assert after["status"] == "complete" and after["study"]["created_here"] is False
    assert "***" not in json.dumps(after)


def test_an_ann_export_from_relative_paths_verifies_from_another_folder(
        data_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    assert main(["sweep", "spec.yaml", "--out", "run", "--json"]) == 0
    assert main(["export", "run", "--engine", "hnswlib", "--out", "tuned.yaml"]) == 0
    doc = yaml.safe_load((data_folder / "tuned.yaml").read_text())
    assert doc["source"]["dataset"]["base"] == str(data_folder / "data" / "base.npy")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("PWD", str(elsewhere))
    capsys.readouterr()
    assert main(["verify", str(data_folder / "tuned.yaml"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["holds"] and report["fingerprint_matches"]


def test_a_config_tuned_from_arrays_verifies_with_the_data_given(
        data_folder: Path, capsys) -> None:
    base, queries = vectors()
    ds = VectorDataset.from_arrays(base, queries, metric="l2")
    spec = {k: v for k, v in SWEEP.items() if k != "dataset"}
    run = retrieval.sweep(spec, dataset=ds, out="arrays-run")
    exported = retrieval.export(run, "hnswlib", "arrays.yaml")
    with pytest.raises(ConfigError, match="dataset="):  # no file names in-memory data
        retrieval.verify(exported)
    assert retrieval.verify(exported, dataset=ds).holds
    other = VectorDataset.from_arrays(*vectors(seed=1), metric="l2")
    with pytest.raises(DataError, match="not the data the config was tuned on"):
        retrieval.verify(exported, dataset=other)
    capsys.readouterr()
    assert main(["verify", "arrays.yaml", "--dataset", "synthetic-small"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fingerprint" in err, err


@pytest.mark.slow
@pytest.mark.model
def test_a_rerank_export_of_a_beir_folder_under_the_cwd_verifies(
        data_folder: Path, capsys) -> None:
    """``dataset: beir:my-beir`` (relative, in the current folder): export and verify read the
    folder (issue 20: the cwd was masked, 'pairs/beir folder not found: <cwd>/***/...')."""
    from retrieval.loaders.shared import load_cranfield
    from retrieval.testing.byo import write_beir

    pytest.importorskip("ranx")
    try:
        coll = load_cranfield(relevance="gain")
    except DataError as exc:
        pytest.skip(f"Cranfield data folder absent: {exc}")
    write_beir(coll, data_folder / "my-beir", n_queries=24, n_docs=200, seed=3)
    (data_folder / "rerank.yaml").write_text(yaml.safe_dump({
        "name": "cwd-rerank", "dataset": "beir:my-beir", "depths": [0, 5, 10], "recall_k": 50,
        "bm25": {"token_pattern": r"\w+"}, "latency": {"sample_queries": 1, "warmup": 0},
        "router": {"quantiles": 4}}))
    assert main(["tune", "rerank", "rerank.yaml", "--out", "rr", "--json"]) == 0
    assert main(["export", "rr", "--engine", "rerank", "--out", "rerank-depth.yaml"]) == 0
    doc = yaml.safe_load((data_folder / "rerank-depth.yaml").read_text())
    assert doc["evidence"]["dataset"]["path"] == str(data_folder / "my-beir")
    capsys.readouterr()
    assert main(["verify", "rerank-depth.yaml", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["holds"] is True


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.redis
def test_a_cache_export_of_a_pairs_file_under_the_cwd_verifies(
        data_folder: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``pairs: {path: pairs.csv}`` (relative, in the current folder): the export records the
    file's absolute path and verify re-measures on it (issue 20: the cwd was masked, 'pairs
    file not found: <cwd>/***/pairs.csv')."""
    from retrieval.loaders.shared import load_qqp_pairs
    from retrieval.testing.byo import sample_pairs, write_pairs

    try:
        pairs = load_qqp_pairs("full")
    except DataError as exc:
        pytest.skip(f"QQP pairs data folder absent: {exc}")
    write_pairs(sample_pairs(pairs, 120, seed=5), data_folder / "pairs.csv", "csv")
    (data_folder / "cache.yaml").write_text(yaml.safe_dump({
        "name": "cwd-cache", "pairs": {"path": "pairs.csv"},
        "cache": {"name": f"rwb-cwd-{os.urandom(3).hex()}"},
        "latency": {"sizes": [50], "queries": 10, "warmup": 2}}))
    monkeypatch.setenv("REDIS_URL", redis_url)
    assert main(["tune", "cache", "cache.yaml", "--out", "cr", "--json"]) == 0
    assert main(["export", "cr", "--engine", "redisvl", "--out", "cache-export.yaml"]) == 0
    text = (data_folder / "cache-export.yaml").read_text()
    assert str(data_folder / "pairs.csv") in text and "***" not in text
    capsys.readouterr()
    assert main(["verify", "cache-export.yaml", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["holds"] is True and all(c["passed"] for c in report["checks"])
