"""The build cache removes only entries rwb wrote (a sidecar with rwb's marker and the folder's
own key): a user's folders and files in the cache folder survive eviction and ``rwb cache
clear``; a clear that cannot remove anything says so; a corrupt sidecar is one warning, not a
traceback; the key holds the seed, the data and the build code. Real hnswlib on 2,000 x 16."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

import retrieval
from retrieval.cli import main
from retrieval.data import VectorDataset
from retrieval.evaluation import BuiltIndex, Evaluator
from retrieval.indexes import buildcache
from retrieval.indexes.buildcache import SIDECAR, CacheSettings, IndexCache

HNSW = {"M": 8, "ef_construction": 32}
LOGGER = "retrieval.indexes.buildcache"


def dataset(seed: int = 3, name: str = "owned") -> VectorDataset:
    rng = np.random.default_rng(seed)
    return VectorDataset(name=name, base=rng.standard_normal((2000, 16)).astype(np.float32),
                         queries=rng.standard_normal((40, 16)).astype(np.float32), metric="l2")


@pytest.fixture(scope="module")
def ds() -> VectorDataset:
    return dataset()


def build(ds: VectorDataset, root: Path, params=None, seed: int = 0, **settings) -> BuiltIndex:
    cache = IndexCache(CacheSettings(root=root, **settings))
    with Evaluator(ds, 10, warmup=0, batch_repeats=1, build_threads=1, seed=seed,
                   index_cache=cache) as ev:
        return ev.build("hnswlib", params if params is not None else HNSW)


def plant_user_things(root: Path) -> dict[Path, bytes]:
    """What a user keeps in the cache folder: a big folder, a file, a folder with a foreign
    entry.json, a folder named like a key, an old folder named like a temporary one."""
    root.mkdir(parents=True, exist_ok=True)
    things = {
        root / "photos" / "a": os.urandom(3_000_000),
        root / "notes.txt": b"mine",
        root / "project" / SIDECAR: json.dumps({"identity": {"kind": "index"}}).encode(),
        root / ("ab" * 16) / SIDECAR: json.dumps({"key": "ab" * 16}).encode(),
        root / ".tmp-mine" / "x": b"x",
        root / ".rwb-tmp-mine" / "x": b"x",
    }
    for path, data in things.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    old = time.time() - 10 * 3600
    for p in (root / ".tmp-mine", root / ".rwb-tmp-mine"):
        os.utime(p, (old, old))
    return things


def assert_intact(things: dict[Path, bytes]) -> None:
    for path, data in things.items():
        assert path.read_bytes() == data, path


def test_eviction_never_removes_what_rwb_did_not_write(ds, tmp_path):
    """The issue's reproduction: a 3 MB folder in a cache limited to 1 MB survives."""
    things = plant_user_things(tmp_path)
    first = build(ds, tmp_path, max_mb=1)
    assert first.outcome.stored
    size = sum(p.stat().st_size for p in (tmp_path / first.outcome.key).iterdir())
    # room for one entry: the older entry is evicted, nothing of the user's
    other = build(ds, tmp_path, {"M": 8, "ef_construction": 33}, max_mb=size * 1.5 / 1e6)
    assert other.outcome.stored and not (tmp_path / first.outcome.key).exists()
    assert_intact(things)
    cache = IndexCache(CacheSettings(root=tmp_path))
    assert [e.key for e in cache.entries()] == [other.outcome.key]
    assert cache.total_bytes() < 1_000_000  # the user's 3 MB are not counted


def test_cache_clear_removes_only_rwb_entries(ds, tmp_path, monkeypatch, capsys):
    things = plant_user_things(tmp_path)
    keys = {build(ds, tmp_path).outcome.key,
            build(ds, tmp_path, {"M": 8, "ef_construction": 33}).outcome.key}
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(tmp_path))
    assert main(["cache", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {e["key"] for e in listed["entries"]} == keys
    assert main(["cache", "clear", "--json"]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert (cleared["removed"], cleared["failed"]) == (2, [])
    assert not any((tmp_path / k).exists() for k in keys)
    assert_intact(things)


def _without_root_override() -> None:
    """In the child: drop CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH from the bounding set, so that
    a process running as root obeys folder permissions like any user."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_clear_of_a_read_only_cache_reports_what_happened(ds, tmp_path):
    """A real read-only folder (as root too: the child gives up root's permission override)."""
    import subprocess
    import sys

    key = build(ds, tmp_path).outcome.key
    env = {**os.environ, "RWB_INDEX_CACHE_DIR": str(tmp_path)}
    tmp_path.chmod(0o555)
    try:
        proc = subprocess.run([sys.executable, "-m", "retrieval", "cache", "clear"], env=env,
                              capture_output=True, text=True, timeout=120,
                              preexec_fn=_without_root_override if os.geteuid() == 0 else None)
    finally:
        tmp_path.chmod(0o755)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("removed 0 cached index builds (0.0 MB)")
    err = proc.stderr
    assert err.count("\n") == 1 and "could not remove 1 cached index builds" in err
    assert "Traceback" not in err and "Permission denied" in err
    assert (tmp_path / key / SIDECAR).is_file()  # whole: not half deleted
    assert build(ds, tmp_path).outcome.cache == "hit"


def _edit(entry: Path, **fields) -> None:
    meta = json.loads((entry / SIDECAR).read_text())
    meta.update(fields)
    (entry / SIDECAR).write_text(json.dumps(meta))


@pytest.mark.parametrize("fields", [{"build_s": "abc"}, {"build_threads": "many"},
                                    {"memory_bytes": "lots"}])
def test_a_corrupt_sidecar_field_is_one_warning_and_a_rebuild(ds, tmp_path, caplog, capsys,
                                                              monkeypatch, fields):
    first = build(ds, tmp_path)
    _edit(tmp_path / first.outcome.key, **fields)
    monkeypatch.setenv("RWB_INDEX_CACHE_DIR", str(tmp_path))
    assert main(["cache", "list"]) == 0  # listed, not a traceback
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again = build(ds, tmp_path)
    assert again.outcome.cache == "miss" and again.outcome.stored  # rwb's own: replaced
    assert any(f"corrupt {SIDECAR}" in r.getMessage() and "rebuilding" in r.getMessage()
               for r in caplog.records if r.name == LOGGER)
    assert build(ds, tmp_path).outcome.cache == "hit"


def test_a_folder_at_the_key_that_is_not_rwbs_is_left_alone(ds, tmp_path, caplog):
    key = build(ds, tmp_path / "probe").outcome.key
    foreign = tmp_path / "cache" / key
    foreign.mkdir(parents=True)
    (foreign / SIDECAR).write_text("{not json")
    (foreign / "index.hnsw").write_bytes(b"mine")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = build(ds, tmp_path / "cache")
    assert got.outcome.cache == "miss" and not got.outcome.stored
    assert (foreign / "index.hnsw").read_bytes() == b"mine"
    assert any("left alone" in r.getMessage() for r in caplog.records)


def test_an_entry_of_the_first_format_is_rwbs(tmp_path):
    """Entries written before the marker (format 1: the folder is named by the identity's hash
    without the versions) are recognised, listed and cleared."""
    ident = {"kind": "index", "format": 1, "backend": "hnswlib", "library_version": "0.8.0",
             "seed": 0, "data": "x", "n": 10}
    core = {k: v for k, v in ident.items() if k not in ("library_version", "format")}
    key = hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:32]
    (tmp_path / key).mkdir()
    (tmp_path / key / SIDECAR).write_text(json.dumps({"identity": ident, "files": {}}))
    impostor = tmp_path / ("0" * 32)  # the same sidecar under a name that is not its hash
    impostor.mkdir()
    (impostor / SIDECAR).write_text(json.dumps({"identity": ident, "files": {}}))
    cache = IndexCache(CacheSettings(root=tmp_path))
    assert [e.key for e in cache.entries()] == [key]
    assert cache.clear().removed == 1
    assert not (tmp_path / key).exists() and impostor.is_dir()


# --- what the key holds (a mutation dropping any of these fails here) -------------------------

def test_builds_of_another_seed_are_other_entries(ds, tmp_path):
    a = build(ds, tmp_path, seed=0)
    b = build(ds, tmp_path, seed=1)
    assert (a.outcome.cache, b.outcome.cache) == ("miss", "miss")
    assert a.outcome.key != b.outcome.key
    assert (tmp_path / a.outcome.key).is_dir() and (tmp_path / b.outcome.key).is_dir()
    assert build(ds, tmp_path, seed=1).outcome.cache == "hit"
    assert build(ds, tmp_path, seed=0).outcome.cache == "hit"


def test_other_data_of_the_same_name_and_shape_is_another_entry(ds, tmp_path):
    a = build(ds, tmp_path)
    other = dataset(seed=4, name=ds.name)
    assert other.fingerprint != ds.fingerprint
    b = build(other, tmp_path)
    assert b.outcome.cache == "miss" and b.outcome.key != a.outcome.key
    assert build(ds, tmp_path).outcome.cache == "hit"


def test_other_build_code_is_another_entry(ds, tmp_path, monkeypatch):
    a = build(ds, tmp_path)
    ident = json.loads((tmp_path / a.outcome.key / SIDECAR).read_text())["identity"]
    assert ident["build_code"].startswith(f"{retrieval.__version__}+")
    assert ident["format"] == buildcache.FORMAT
    monkeypatch.setattr(buildcache, "code_version", lambda cls=None: "9.9.9+changed")
    b = build(ds, tmp_path)
    assert b.outcome.cache == "miss" and b.outcome.key != a.outcome.key


def test_the_build_code_digest_follows_the_source(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n")
    before = buildcache._dir_digest((str(tmp_path),))
    (tmp_path / "m.py").write_text("x = 2\n")
    buildcache._dir_digest.cache_clear()
    assert buildcache._dir_digest((str(tmp_path),)) != before
    from retrieval.engines.hnswlib.index import HnswlibIndex

    assert buildcache.code_version(HnswlibIndex) == buildcache.code_version(HnswlibIndex)
