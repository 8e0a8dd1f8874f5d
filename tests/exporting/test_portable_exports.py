"""Issue 34 new user 2: own-data exports are portable. A cache export tuned on the user's pairs
file and a rerank export tuned on a BEIR folder, verified from another folder after the data
moved (and was renamed): found by its fingerprint, where it was found said in the report;
``--dataset`` takes the pairs file / the folder; other content is refused (fingerprint)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import yaml

import retrieval
from retrieval.cli import main
from retrieval.paths import data_dir
from tests.cache.test_byo_cache import SMALL, files  # noqa: F401 (a fixture)
from tests.rerank.test_custom_rerank import _spec, beir  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


def _verify_json(*args: str) -> tuple[int, dict]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["verify", *args, "--json"])
    return code, (json.loads(buf.getvalue()) if buf.getvalue().strip() else {})


@pytest.mark.redis
@pytest.mark.model
@pytest.mark.slow  # a cache tuning run (700 pairs embedded) and two verifies
@pytest.mark.skipif(not (data_dir() / "gptcache_qqp").is_dir(),
                    reason=f"shared data folder {data_dir() / 'gptcache_qqp'} is absent")
def test_a_cache_export_verifies_from_another_folder_after_its_pairs_file_moved(
        files: dict[str, Path], redis_url: str, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.delenv("RWB_DATA_DIR", raising=False)
    mine = tmp_path / "laptop" / "pairs.jsonl"
    mine.parent.mkdir()
    shutil.copy(files["jsonl"], mine)
    spec = tmp_path / "laptop" / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SMALL, "name": "portable",
                                    "cache": {"name": "rwb-portable-test"},
                                    "pairs": {"path": "pairs.jsonl"}}))
    run = tmp_path / "laptop" / "run"
    assert main(["tune", "cache", str(spec), "--out", str(run), "--json"]) == 0
    export = tmp_path / "repo" / "cache.yaml"
    export.parent.mkdir()
    assert main(["export", str(run), "--engine", "redisvl", "--out", str(export)]) == 0
    capsys.readouterr()
    files_doc = yaml.safe_load(export.read_text())["evidence"]["dataset"]["files"]
    assert files_doc["pairs"]["location"] == {"export": "../laptop/pairs.jsonl"}
    runner = tmp_path / "runner"
    (runner / "data" / "mine").mkdir(parents=True)
    moved = runner / "data" / "mine" / "traffic.jsonl"  # moved and renamed
    mine.rename(moved)
    monkeypatch.chdir(runner)
    code, rep = _verify_json(str(export))
    assert code == 0 and rep["holds"], rep
    assert rep["measured"]["dataset_found_at"]["pairs"].startswith(str(moved.resolve()))
    assert "the current folder" in rep["measured"]["dataset_found_at"]["pairs"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # nothing here: --dataset names the file
    code, rep = _verify_json(str(export), "--dataset", str(moved))
    assert code == 0 and rep["holds"] and "dataset_found_at" not in rep["measured"], rep
    other = elsewhere / "other.jsonl"
    shutil.copy(files["hard"], other)
    code, _ = _verify_json(str(export), "--dataset", str(other))
    assert code == 2 and "fingerprint" in capsys.readouterr().err


@pytest.mark.model
@pytest.mark.slow  # loads the packaged MiniLM for the dense first stage
def test_a_rerank_export_verifies_from_another_folder_after_its_beir_folder_moved(
        beir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    from retrieval.testing.rerank_server import overlap_scores

    monkeypatch.delenv("RWB_DATA_DIR", raising=False)
    mine = tmp_path / "laptop" / "tiny"
    shutil.copytree(beir, mine)
    run = retrieval.tune_rerank(_spec(mine), reranker=overlap_scores, out=tmp_path / "run")
    exported = retrieval.export(run, "rerank", tmp_path / "repo" / "rerank.yaml")
    loc = yaml.safe_load(exported.path.read_text())["evidence"]["dataset"]["location"]
    assert loc == {"export": "../laptop/tiny"}
    runner = tmp_path / "runner"
    runner.mkdir()
    moved = runner / "datasets" / "my-collection"
    moved.parent.mkdir()
    mine.rename(moved)
    monkeypatch.chdir(runner)
    code, rep = _verify_json(str(exported.path))
    assert code == 0 and rep["holds"], rep
    assert rep["measured"]["dataset_found_at"].startswith(str(moved.resolve()))
    monkeypatch.setenv("RWB_DATA_DIR", str(runner / "datasets"))
    monkeypatch.chdir(tmp_path)
    code, rep = _verify_json(str(exported.path))
    assert code == 0 and "$RWB_DATA_DIR" in rep["measured"]["dataset_found_at"], rep
