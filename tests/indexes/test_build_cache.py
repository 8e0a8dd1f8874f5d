"""The on-disk cache of built indexes, end to end: a second run of the same sweep spec loads
every index and measures identical recall; a resumed sweep and `rwb verify` of an export load
the sweep's indexes; build threads are recorded in the manifest. Real hnswlib / Faiss, small
synthetic data (3,000 x 32)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from retrieval.cli import main
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

SPEC = {
    "name": "build-cache",
    "dataset": "synthetic-small",
    "k": 10,
    "warmup": 2,
    "batch_repeats": 1,
    "target_recall": 0.9,
    "indexes": [
        {"backend": "hnswlib", "build": {"M": [8, 12], "ef_construction": 40},
         "search": {"ef_search": 10}},
        {"backend": "faiss-hnsw", "build": {"M": 8, "ef_construction": 40},
         "search": {"ef_search": 10}},
        {"backend": "faiss-ivf", "build": {"nlist": 32, "encoding": ["flat", "sq8"]},
         "search": {"nprobe": 1}},
        {"backend": "faiss-flat"},
    ],
    "tune": {"strategy": "target", "search_range": {"ef_search": [10, 64], "nprobe": [1, 32]}},
}
CACHEABLE = 5  # hnswlib x2, faiss-hnsw, faiss-ivf x2 (faiss-flat has nothing to build)


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def rows(summary: dict) -> dict:
    """(backend, build, search) -> (recall, build_s) of every measured config but the flat
    index (nothing to build, nothing cached)."""
    return {(r["backend"], json.dumps(r["build"], sort_keys=True),
             json.dumps(r["search"], sort_keys=True)): (r["recall"], r["build_s"])
            for r in summary["rows"] if r["backend"] != "faiss-flat"}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("index-cache")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, cache_dir):
    mp = pytest.MonkeyPatch()
    mp.setenv("RWB_INDEX_CACHE_DIR", str(cache_dir))
    try:
        spec = parse_spec(SPEC, source="cache.yaml")
        first = run_sweep(spec, tmp_path_factory.mktemp("first") / "run")
        second = run_sweep(spec, tmp_path_factory.mktemp("second") / "run")
    finally:
        mp.undo()
    return first, second


def test_second_run_loads_every_index_and_measures_identical_recall(two_runs):
    first, second = two_runs
    m1, m2 = manifest(first.run.path), manifest(second.run.path)
    c1, c2 = m1["index_cache"], m2["index_cache"]
    assert (c1["misses"], c1["hits"]) == (CACHEABLE, 0)
    assert (c2["hits"], c2["misses"]) == (CACHEABLE, 0)
    assert all(b["cache"] == "hit" and b["load_s"] is not None for b in c2["builds"]
               if b["backend"] != "faiss-flat")
    # the IVF encodings with the same nlist shared one trained coarse quantizer
    assert c1["shared_ivf_quantizers"] >= 1
    # a loaded index measures exactly the same recall on every config and reports the
    # original build time (which config is cheapest may differ: latency is re-timed)
    rows1, rows2 = rows(first.summary), rows(second.summary)
    assert rows1 == rows2 and len(rows1) >= CACHEABLE
    assert "original build time" in c2["note"]
    worker = second.summary["this_worker"]["index_cache"]
    assert (worker["hits"], worker["misses"]) == (CACHEABLE, 0) and worker["load_s"] > 0


def test_manifest_records_build_and_search_threads(two_runs):
    first, _ = two_runs
    builds = manifest(first.run.path)["builds"]
    assert builds["search_threads"] == 1
    assert builds["build_threads"] >= 1
    assert builds["reproducible_builds"] == (builds["build_threads"] == 1)
    assert "index_build.threads: 1" in builds["note"]


def test_verify_of_an_export_loads_the_sweeps_index(two_runs, cache_dir, tmp_path,
                                                    monkeypatch, capsys, caplog):
    first, _ = two_runs
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(cache_dir))
    path = tmp_path / "tuned.hnswlib.yaml"
    assert main(["export", str(first.run.path), "--engine", "hnswlib", "--out", str(path)]) == 0
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="retrieval.evaluation"):
        assert main(["verify", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any(r.getMessage().startswith("loaded hnswlib") for r in caplog.records)
    assert report["holds"]
    # the very index the sweep measured, whatever its build threads: the same recall
    assert report["measured"]["recall"] == pytest.approx(report["recorded"]["recall"],
                                                         abs=1e-12)


def only(*entries: int, **extra) -> dict:
    """SPEC with only the index entries at these positions (and their knobs' ranges)."""
    indexes = [SPEC["indexes"][i] for i in entries]
    knobs = {"hnswlib": "ef_search", "faiss-hnsw": "ef_search", "faiss-ivf": "nprobe"}
    used = {knobs[e["backend"]] for e in indexes if e["backend"] in knobs}
    ranges = {k: v for k, v in SPEC["tune"]["search_range"].items() if k in used}
    return {**SPEC, "indexes": indexes, "tune": {"strategy": "target", "search_range": ranges},
            **extra}


def test_a_resumed_sweep_loads_what_the_killed_one_built(tmp_path, monkeypatch):
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(tmp_path / "cache"))
    spec = parse_spec(only(0), source="cache.yaml")
    out = tmp_path / "run"
    calls = []

    def stop_after_two(done: int, total: int, what: str) -> None:
        calls.append(what)
        if len(calls) == 2:  # both hnswlib builds were made before the first unit ended
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, progress=stop_after_two)
    built_before = len(list((tmp_path / "cache").iterdir()))
    assert built_before >= 1
    resumed = run_sweep(spec, out)
    c = manifest(resumed.run.path)["index_cache"]
    assert c["hits"] >= 1
    assert resumed.summary["backends"]
    # how indexes are built is not what is measured: other build threads resume the study
    from retrieval.tune.sweep import apply_overrides

    again = run_sweep(apply_overrides(spec, build_threads=1), out)
    assert again.summary["backends"] == resumed.summary["backends"]


def test_cache_off_by_spec_and_by_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(tmp_path / "cache"))
    small = only(1, index_build={"cache": False})
    res = run_sweep(parse_spec(small, source="off.yaml"), tmp_path / "a")
    c = manifest(res.run.path)["index_cache"]
    assert not c["enabled"] and c["off"] == 1 and not (tmp_path / "cache").exists()
    monkeypatch.setenv("RWB_INDEX_CACHE", "off")
    small["index_build"] = {"cache": True}
    res = run_sweep(parse_spec(small, source="off.yaml"), tmp_path / "b")
    assert not manifest(res.run.path)["index_cache"]["enabled"]


def test_rwb_cache_list_and_clear(two_runs, cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(cache_dir))
    assert main(["cache", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    kinds = [e["kind"] for e in listed["entries"]]
    assert kinds.count("index") == CACHEABLE and "quantizer" in kinds
    assert listed["bytes"] == sum(e["bytes"] for e in listed["entries"]) > 0
    assert main(["cache", "list"]) == 0
    text = capsys.readouterr().out
    assert "hnswlib" in text and "faiss-ivf" in text and str(cache_dir) in text
    assert main(["cache", "clear", "--json"]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["removed"] == len(kinds)
    assert main(["cache", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == []


def test_help_tells_the_two_caches_apart(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    text = " ".join(out.split())
    line = text[text.index(" cache built-index"):text.index(" datasets ")]
    assert "built-index cache" in line and "semantic cache is 'rwb tune cache'" in line


def test_eval_build_threads_flag_is_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(tmp_path / "cache"))
    spec = tmp_path / "e.yaml"
    spec.write_text(json.dumps({**only(0), "index_build": {"threads": 2}}))
    out = tmp_path / "run"
    assert main(["eval", str(spec), "--build-threads", "1", "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    m = manifest(out)
    assert m["builds"]["build_threads"] == 1 and m["builds"]["reproducible_builds"]
    assert {b["build_threads"] for b in m["index_cache"]["builds"]} == {1}
    import pandas as pd

    table = pd.read_parquet(out / "measurements.parquet")
    assert set(table["cache"]) == {"miss"} and set(table["build_threads"]) == {1}


@pytest.mark.parametrize("strategy", ["grid", "target", "optuna"])
def test_the_example_spec_plans(strategy):
    from retrieval.paths import REPO_ROOT
    from retrieval.tune.spec import load_spec
    from retrieval.tune.sweep import apply_overrides, check_tunable
    from retrieval.tune.units import plan_units

    spec = apply_overrides(load_spec(REPO_ROOT / "sweeps" / "minilm-qqp20k-build-cache.yaml"),
                           strategy=strategy)
    check_tunable(spec)
    assert spec.index_build.cache and spec.index_build.threads is None
    units = plan_units(spec, "grid" if strategy == "grid" else "target")
    assert {u.entry for u in units} == set(range(len(spec.indexes)))


def test_a_sweep_with_a_small_cache_leaves_the_users_folder_alone(tmp_path, monkeypatch):
    """The issue's reproduction: `mkdir -p d/photos && head -c 3M /dev/urandom > d/photos/a &&
    RWB_INDEX_CACHE_DIR=d RWB_INDEX_CACHE_MAX_MB=1 rwb sweep SPEC --strategy target --out r/x`
    deleted d/photos."""
    import os

    d = tmp_path / "d"
    (d / "photos").mkdir(parents=True)
    photo = os.urandom(3 * 2**20)
    (d / "photos" / "a").write_bytes(photo)
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(d))
    monkeypatch.setenv("RWB_INDEX_CACHE_MAX_MB", "1")
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps(only(0)))
    assert main(["sweep", str(spec), "--strategy", "target", "--out",
                 str(tmp_path / "r" / "x")]) == 0
    assert (d / "photos" / "a").read_bytes() == photo
    assert manifest(tmp_path / "r" / "x")["index_cache"]["misses"] >= 1
