"""rwb installed from a wheel: every package of retrieval/ is listed in pyproject.toml, the dataset
manifests of the top-level datasets/ folder ship as package data, and no path assumes a
checkout (manifests, data folder, git state). The wheel itself is built and run in
tests/project/test_wheel.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

from retrieval import paths
from retrieval.runs import provenance

ROOT = Path(__file__).resolve().parents[2]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"]


def test_every_package_is_listed_and_the_manifests_map_to_datasets():
    conf = _setuptools()
    found = set(find_packages(where=str(ROOT), include=["retrieval", "retrieval.*"]))
    assert set(conf["packages"]) == found | {"retrieval._manifests"}
    assert conf["package-dir"] == {"retrieval._manifests": "datasets"}
    assert "*.yaml" in conf["package-data"]["retrieval._manifests"]
    assert not (ROOT / "datasets" / "__init__.py").exists()  # would shadow Hugging Face datasets


def test_in_a_checkout_the_manifests_are_the_datasets_folder(monkeypatch):
    monkeypatch.delenv("RWB_DATASETS_DIR", raising=False)
    assert paths.checkout_root() == ROOT
    assert paths.manifests_dir() == ROOT / "datasets"


def test_installed_the_manifests_are_the_package_data(monkeypatch, tmp_path):
    monkeypatch.delenv("RWB_DATASETS_DIR", raising=False)
    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    assert paths.manifests_dir() == paths.PACKAGE_DIR / "_manifests"
    monkeypatch.setenv("RWB_DATASETS_DIR", str(tmp_path))
    assert paths.manifests_dir() == tmp_path


def test_installed_the_data_folder_is_the_user_data_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("RWB_DATA_DIR", raising=False)
    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert paths.data_dir() == tmp_path / "rwb" / "data"
    assert paths.data_dir_candidates() == [tmp_path / "rwb" / "data"]


def test_checkout_root_is_none_in_a_folder_that_is_not_a_checkout(monkeypatch, tmp_path):
    site = tmp_path / "site-packages"
    (site / "retrieval").mkdir(parents=True)
    monkeypatch.setattr(paths, "PACKAGE_DIR", site / "retrieval")
    assert paths.checkout_root() is None
    (site / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (site / "datasets").mkdir()
    assert paths.checkout_root() == site


def test_git_info_outside_a_checkout_is_null_and_runs_no_git(monkeypatch):
    monkeypatch.setattr(provenance, "checkout_root", lambda: None)

    def no_git(*a, **k):
        raise AssertionError("git must not run outside a checkout")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    assert provenance.git_info() == {"sha": None, "dirty": None}


def test_git_info_in_this_checkout_names_its_commit():
    info = provenance.git_info()
    if (ROOT / ".git").exists():
        assert isinstance(info["sha"], str) and len(info["sha"]) == 40
