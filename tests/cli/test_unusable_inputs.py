"""Unchecked input refused in one line before any work (issue 34, MEDIUM 7): ``rwb profile``'s
``load:`` rates and duration, an unusable ``--otlp-dir`` (sweep, profile)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from retrieval.cli import main
from retrieval.errors import ConfigError
from retrieval.profiling.spec import parse_profile_spec

PROFILE: dict[str, Any] = {"name": "p",
                           "retrieval": {"collections": [{"name": "a", "source": "scifact"}]}}


@pytest.mark.parametrize(("load", "field"), [
    ({"rates": [1e12]}, "load.rates[0]"), ({"rates": [0]}, "load.rates[0]"),
    ({"rates": [5, -1]}, "load.rates[1]"), ({"rates": [math.nan]}, "load.rates[0]"),
    ({"rates": [math.inf]}, "load.rates[0]"), ({"duration_s": math.inf}, "load.duration_s"),
    ({"duration_s": math.nan}, "load.duration_s"),
])
def test_profile_load_is_validated(load: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_profile_spec({**PROFILE, "load": load}, source="p.yaml")
    text = str(err.value)
    assert "\n" not in text and field in text and "received" in text, text


def test_profile_load_within_bounds_is_taken() -> None:
    spec = parse_profile_spec({**PROFILE, "load": {"rates": [50, 200.5], "duration_s": 2}})
    assert spec.load is not None and spec.load.rates == [50, 200.5]


def _unusable(tmp_path: Path, how: str) -> Path:
    if how == "file":
        (tmp_path / "f").write_text("x")
        return tmp_path / "f"
    if how == "under a file":
        (tmp_path / "f").write_text("x")
        return tmp_path / "f" / "traces"
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    return ro / "traces"


@pytest.mark.parametrize("how", ["file", "under a file", "read-only"])
@pytest.mark.parametrize("verb", ["sweep", "profile"])
def test_an_unusable_otlp_dir_is_refused_before_the_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str, verb: str) -> None:
    if how == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder: the case cannot be made here")
    pytest.importorskip("opentelemetry")
    target = _unusable(tmp_path, how)
    spec = tmp_path / "s.yaml"
    if verb == "sweep":
        spec.write_text(yaml.safe_dump({
            "name": "s", "k": 10,
            "dataset": {"kind": "synthetic", "n": 300, "dim": 8, "n_queries": 20,
                        "metric": "l2"},
            "indexes": [{"backend": "faiss-flat"}]}))
    else:
        spec.write_text(yaml.safe_dump(PROFILE))
    assert main([verb, str(spec), "--out", str(tmp_path / "r"), "--otlp-dir",
                 str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--otlp-dir" in err, err
    assert not (tmp_path / "r").exists()  # refused before the run
