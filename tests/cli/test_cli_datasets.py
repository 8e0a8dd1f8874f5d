"""`rwb datasets`: the listing, --json, --load, and the one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.cli import main


def test_datasets_json_lists_manifests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["synthetic-20k"]["kind"] == "synthetic" and rows["synthetic-20k"]["files"] == []
    assert rows["qqp-minilm-20k"]["kind"] == "text"
    assert "gptcache_qqp" in rows["qqp-minilm-20k"]["files"][0]["path"]


def test_datasets_table_and_load(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["name", "kind", "status"]
    assert "synthetic-small" in out
    assert main(["datasets", "--load", "synthetic-small", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["n_base"], summary["dim"], summary["metric"]) == (3000, 32, "l2")


def test_datasets_unknown_name_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "--load", "qqp-minilm-2k"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rwb: error: --load: unknown dataset 'qqp-minilm-2k'")
    assert "Did you mean 'qqp-minilm" in err and "\n" not in err


def test_one_bad_manifest_does_not_break_the_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "good.yaml").write_text("kind: synthetic\nn: 10\ndim: 4\nn_queries: 2\n")
    (tmp_path / "latin.yaml").write_bytes(b"kind: synthetic\ndescription: caf\xe9\n")
    (tmp_path / "home.yaml").write_text("kind: hdf5\npath: ~no-such-user-rwb/x.hdf5\n")
    monkeypatch.setenv("RWB_DATASETS_DIR", str(tmp_path))
    assert main(["datasets"]) == 0
    rows = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()[2:]}
    # RWB_DATASETS_DIR is searched before the built-in manifests (issue 10), not instead of them
    assert {"good", "latin", "home"} <= set(rows) and "synthetic-small" in rows
    assert rows["good"].split()[1:3] == ["synthetic", "ok"]
    assert rows["latin"].split()[1:3] == ["invalid", "invalid"]
    assert f"{tmp_path / 'latin.yaml'}: not UTF-8 text (byte 0xe9" in rows["latin"]
    assert f"{tmp_path / 'home.yaml'}: field 'path'" in rows["home"]
    assert main(["datasets", "--json"]) == 0
    listed = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed["good"]["status"] == "ok" and listed["home"]["status"] == "invalid"
    assert main(["datasets", "--load", "latin"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rwb: error: ") and "not UTF-8" in err and "\n" not in err


def test_missing_datasets_dir_is_one_line(monkeypatch, tmp_path, capsys):
    """RWB_DATASETS_DIR naming no folder is an error naming the variable, not an empty list."""
    from retrieval.cli import main

    monkeypatch.setenv("RWB_DATASETS_DIR", str(tmp_path / "nowhere"))
    assert main(["datasets"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "RWB_DATASETS_DIR" in err and "does not exist" in err
