"""Issue 34 new user 2: an export's own data found again after a move, from another folder
(retrieval.exporting.locate); the fingerprint decides."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

from retrieval.errors import ConfigError
from retrieval.exporting.locate import given_path, locate, location


def _fp(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _find(recorded: Path, export: Path, loc=None, fingerprint: str = "") -> tuple[Path, str | None]:
    return locate(recorded, what="pairs file", where=str(export), export_file=export, loc=loc,
                  is_candidate=Path.is_file, matches=lambda p: _fp(p) == fingerprint)


@pytest.fixture
def moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """pairs.jsonl recorded under tmp/data, the export in tmp/exports; then the data moved."""
    monkeypatch.delenv("RWB_DATA_DIR", raising=False)
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    pairs = data / "sub" / "pairs.jsonl"
    pairs.write_text('{"a": "x", "b": "y", "duplicate": 1}\n')
    export = tmp_path / "exports" / "cache.yaml"
    export.parent.mkdir()
    return {"data": data, "pairs": pairs, "export": export, "root": tmp_path}


def test_location_is_relative_to_rwb_data_dir_and_to_the_export(moved, monkeypatch) -> None:
    monkeypatch.setenv("RWB_DATA_DIR", str(moved["data"]))
    assert location(moved["pairs"], moved["export"]) == {
        "data_dir": "sub/pairs.jsonl", "export": "../data/sub/pairs.jsonl"}
    monkeypatch.delenv("RWB_DATA_DIR")
    assert location(moved["pairs"], moved["export"]) == {"export": "../data/sub/pairs.jsonl"}


def test_the_recorded_path_is_used_while_it_is_there(moved) -> None:
    assert _find(moved["pairs"], moved["export"]) == (moved["pairs"], None)


def test_found_through_rwb_data_dir_from_another_folder(moved, monkeypatch, caplog) -> None:
    fp = _fp(moved["pairs"])
    loc = {"data_dir": "sub/pairs.jsonl"}
    runner = moved["root"] / "runner"
    (runner / "sub").mkdir(parents=True)
    moved["pairs"].rename(runner / "sub" / "pairs.jsonl")
    monkeypatch.setenv("RWB_DATA_DIR", str(runner))
    monkeypatch.chdir(moved["root"] / "exports")
    with caplog.at_level(logging.WARNING):
        path, note = _find(moved["pairs"], moved["export"], loc, fp)
    assert path == (runner / "sub" / "pairs.jsonl").resolve()
    assert note is not None and "$RWB_DATA_DIR" in note and str(path) in note
    assert str(path) in caplog.text and "is not there" in caplog.text


def test_a_renamed_file_under_the_current_folder_is_found_by_its_fingerprint(
        moved, monkeypatch) -> None:
    fp = _fp(moved["pairs"])
    cwd = moved["root"] / "ci" / "checkout"
    (cwd / "a" / "b").mkdir(parents=True)
    impostor = cwd / "pairs.jsonl"  # the same name, other content: never taken
    impostor.write_text('{"a": "x", "b": "z", "duplicate": 0}\n')
    target = cwd / "a" / "b" / "renamed.jsonl"
    moved["pairs"].rename(target)
    monkeypatch.chdir(cwd)
    path, note = _find(moved["pairs"], moved["export"], {"export": "../data/sub/pairs.jsonl"},
                       fp)
    assert path == target.resolve()
    assert note is not None and "the current folder" in note and "fingerprint" in note


def test_data_found_nowhere_is_returned_as_recorded(moved, monkeypatch) -> None:
    fp = _fp(moved["pairs"])
    moved["pairs"].unlink()
    monkeypatch.chdir(moved["root"] / "exports")
    assert _find(moved["pairs"], moved["export"], None, fp) == (moved["pairs"], None)


def test_given_path_names_what_it_wanted_and_what_it_got(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--dataset .*a labelled pairs file; received a "
                                          r"folder"):
        given_path(tmp_path, where="x.yaml", want="a labelled pairs file", want_dir=False)
    with pytest.raises(ConfigError, match="received a path that is not there"):
        given_path(tmp_path / "no", where="x.yaml", want="a BEIR folder", want_dir=True)
