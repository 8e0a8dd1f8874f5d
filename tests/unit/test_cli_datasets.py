"""`rwb datasets`: the listing, --json, --load, and the one-line error."""

from __future__ import annotations

import json

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
