"""Bad cache entries are rebuilt with a warning, never trusted; an unwritable or full cache
folder warns once and builds go on without caching; the size limit evicts the least recently
used entries; bad settings are one clear line. Real hnswlib / Faiss on 2,000 x 16 vectors."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from retrieval.cli import main
from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.evaluation import BuiltIndex, Evaluator
from retrieval.indexes.buildcache import SIDECAR, CacheSettings, IndexCache
from retrieval.tune.spec import parse_spec

HNSW = {"M": 8, "ef_construction": 32}
LOGGER = "retrieval.indexes.buildcache"


@pytest.fixture(scope="module")
def ds() -> VectorDataset:
    rng = np.random.default_rng(3)
    return VectorDataset(name="faults", base=rng.standard_normal((2000, 16)).astype(np.float32),
                         queries=rng.standard_normal((40, 16)).astype(np.float32), metric="l2")


def build(ds: VectorDataset, root: Path, backend: str = "hnswlib", params=None,
          build_threads: int = 1, **settings) -> tuple[BuiltIndex, float]:
    cache = IndexCache(CacheSettings(root=root, **settings))
    ev = Evaluator(ds, 10, warmup=0, batch_repeats=1, build_threads=build_threads,
                   index_cache=cache)
    built = ev.build(backend, params if params is not None else HNSW)
    search = {"ef_search": 20} if backend != "faiss-ivf" else {"nprobe": 2}
    recall = ev.measure(built, search, modes=["batch"])[0].recall
    ev.close()
    return built, recall


def only_entry(root: Path) -> Path:
    (entry,) = [p for p in root.iterdir() if not p.name.startswith(".")]
    return entry


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.WARNING]


def test_hit_after_miss_is_the_same_index(ds, tmp_path):
    first, r1 = build(ds, tmp_path)
    second, r2 = build(ds, tmp_path)
    assert (first.outcome.cache, second.outcome.cache) == ("miss", "hit")
    assert r1 == r2 and second.info.build_s == first.info.build_s
    assert second.outcome.load_s is not None and second.memory_bytes == first.memory_bytes


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("damage", "expect"), [
    (_truncate, "truncated or corrupt"),
    (_flip, "checksum mismatch"),
])
def test_damaged_index_file_is_rebuilt_with_a_warning(ds, tmp_path, caplog, damage, expect):
    _, r1 = build(ds, tmp_path)
    damage(only_entry(tmp_path) / "index.hnsw")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again, r2 = build(ds, tmp_path)
    assert again.outcome.cache == "miss" and again.outcome.stored
    assert any(expect in w and "rebuilding" in w for w in warnings_of(caplog))
    assert r2 == r1  # one build thread: the rebuilt index is the same
    third, r3 = build(ds, tmp_path)  # and the fresh entry is good
    assert third.outcome.cache == "hit" and r3 == r1


def _edit_sidecar(entry: Path, **identity) -> None:
    meta = json.loads((entry / SIDECAR).read_text())
    meta["identity"].update(identity)
    (entry / SIDECAR).write_text(json.dumps(meta))


def test_entry_of_another_library_version_is_rebuilt(ds, tmp_path, caplog):
    build(ds, tmp_path)
    _edit_sidecar(only_entry(tmp_path), library_version="0.0.1")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again, _ = build(ds, tmp_path)
    assert again.outcome.cache == "miss"
    (w,) = warnings_of(caplog)
    assert "hnswlib library_version '0.0.1'" in w and "rebuilding" in w
    assert json.loads((only_entry(tmp_path) / SIDECAR).read_text())["identity"][
        "library_version"] != "0.0.1"


def test_mismatched_or_unreadable_sidecar_is_rebuilt(ds, tmp_path, caplog):
    build(ds, tmp_path)
    _edit_sidecar(only_entry(tmp_path), seed=99)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert build(ds, tmp_path)[0].outcome.cache == "miss"
    assert any("for another build (seed differ)" in w for w in warnings_of(caplog))
    caplog.clear()
    (only_entry(tmp_path) / SIDECAR).write_text("{not json")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert build(ds, tmp_path)[0].outcome.cache == "miss"
    assert any(f"no readable {SIDECAR}" in w for w in warnings_of(caplog))


def test_a_file_the_library_refuses_is_rebuilt(ds, tmp_path, caplog):
    """Checksums match (the sidecar was rewritten) but Faiss cannot read the file."""
    import hashlib

    _, r1 = build(ds, tmp_path, "faiss-hnsw")
    entry = only_entry(tmp_path)
    junk = b"not a faiss index" * 10
    (entry / "index.faiss").write_bytes(junk)
    meta = json.loads((entry / SIDECAR).read_text())
    meta["files"]["index.faiss"] = {"bytes": len(junk), "sha256": hashlib.sha256(junk).hexdigest()}
    (entry / SIDECAR).write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again, r2 = build(ds, tmp_path, "faiss-hnsw")
    assert again.outcome.cache == "miss" and r2 == r1
    assert any("could not be loaded" in w for w in warnings_of(caplog))


def test_unwritable_cache_folder_warns_once_and_builds(ds, tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = IndexCache(CacheSettings(root=blocker / "cache"))
    ev = Evaluator(ds, 10, warmup=0, batch_repeats=1, build_threads=1, index_cache=cache)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        a = ev.build("hnswlib", HNSW)
        b = ev.build("faiss-hnsw", HNSW)
    ev.close()
    assert (a.outcome.cache, a.outcome.stored, b.outcome.stored) == ("miss", False, False)
    (w,) = warnings_of(caplog)
    assert "cannot write to" in w and "building without caching" in w and "RWB_INDEX_CACHE" in w


FULL_DISK = textwrap.dedent("""
    import json, resource, signal, sys
    import numpy as np
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    from retrieval.data import VectorDataset
    from retrieval.evaluation import Evaluator
    from retrieval.indexes.buildcache import CacheSettings, IndexCache
    rng = np.random.default_rng(3)
    ds = VectorDataset(name="full", base=rng.standard_normal((2000, 16)).astype(np.float32),
                       queries=rng.standard_normal((40, 16)).astype(np.float32), metric="l2")
    cache = IndexCache(CacheSettings(root=sys.argv[1]))
    ev = Evaluator(ds, 10, warmup=0, batch_repeats=1, build_threads=1, index_cache=cache)
    # ground truth is computed (and cached, small) above; now a limit smaller than any index
    resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, resource.RLIM_INFINITY))
    out = {}
    for backend, params in (("hnswlib", {"M": 8, "ef_construction": 32}),
                            ("faiss-ivf", {"nlist": 16})):
        built = ev.build(backend, params)
        out[backend] = [built.outcome.cache, built.outcome.stored, built.info.n]
    print(json.dumps(out))
""")


def test_full_cache_folder_warns_and_builds_without_caching(tmp_path):
    """A real short write: the process's file-size limit (RLIMIT_FSIZE) makes every write past
    50 kB fail (EFBIG), as a full disk does (ENOSPC); hnswlib's unchecked writer is caught by
    the size check, Faiss's by its own write check."""
    env = {**os.environ, "RWB_CACHE_DIR": str(tmp_path / "rwb-cache")}
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path / "cache")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"hnswlib": ["miss", False, 2000], "faiss-ivf": ["miss", False, 2000]}
    warned = [ln for ln in proc.stderr.splitlines() if "index cache" in ln]
    assert len(warned) == 1 and "cannot write to" in warned[0]
    assert not [p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".tmp-")]


def test_size_limit_evicts_least_recently_used(ds, tmp_path, caplog):
    build(ds, tmp_path)
    size = sum(p.stat().st_size for p in only_entry(tmp_path).iterdir())
    limit_mb = size * 1.5 / 1e6  # room for one entry, not two
    old = only_entry(tmp_path)
    os.utime(old / SIDECAR, (time.time() - 100, time.time() - 100))
    other, _ = build(ds, tmp_path, params={"M": 8, "ef_construction": 33}, max_mb=limit_mb)
    assert other.outcome.stored and not old.exists()
    assert only_entry(tmp_path).name == other.outcome.key
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        big, _ = build(ds, tmp_path, params={"M": 16, "ef_construction": 32},
                       max_mb=size / 10 / 1e6)
    assert not big.outcome.stored
    assert any("does not fit the limit" in w for w in warnings_of(caplog))


def test_reproducible_request_skips_a_multithreaded_entry(ds, tmp_path):
    build(ds, tmp_path, build_threads=2)
    assert build(ds, tmp_path, build_threads=2)[0].outcome.cache == "hit"
    single, _ = build(ds, tmp_path, build_threads=1)
    assert single.outcome.cache == "miss" and single.build_threads == 1
    assert build(ds, tmp_path, build_threads=2)[0].outcome.cache == "hit"  # 1-thread entry


def test_ivf_encodings_share_one_trained_quantizer(ds, tmp_path):
    cache = IndexCache(CacheSettings(root=tmp_path))
    with Evaluator(ds, 10, warmup=0, batch_repeats=1, build_threads=1,
                   index_cache=cache) as ev:
        first = ev.build("faiss-ivf", {"nlist": 16})
        sq8 = ev.build("faiss-ivf", {"nlist": 16, "encoding": "sq8"})
        assert not first.info.extra["shared_quantizer"] and sq8.info.extra["shared_quantizer"]
        shared = ev.measure(sq8, {"nprobe": 4}, modes=["batch"])[0].per_query_recall
    # the same build trained alone (no cache, no sharing) gives the very same results
    with Evaluator(ds, 10, warmup=0, batch_repeats=1, build_threads=1,
                   index_cache=False) as ev:
        alone = ev.build("faiss-ivf", {"nlist": 16, "encoding": "sq8"})
        assert ev.trained.shared == 0 and alone.outcome.cache == "off"
        np.testing.assert_array_equal(
            ev.measure(alone, {"nprobe": 4}, modes=["batch"])[0].per_query_recall, shared)


@pytest.mark.parametrize(("var", "value", "expect"), [
    ("RWB_INDEX_CACHE_MAX_MB", "lots", "RWB_INDEX_CACHE_MAX_MB must be a number of megabytes"),
    ("RWB_INDEX_CACHE_MAX_MB", "-5", "received '-5'"),
    ("RWB_INDEX_CACHE", "maybe", "RWB_INDEX_CACHE must be one of on, off; received 'maybe'"),
])
def test_bad_environment_is_one_line(monkeypatch, capsys, var, value, expect):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=expect):
        IndexCache()
    assert main(["cache", "list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and expect in err and err.count("\n") == 1


SPEC = {"name": "t", "dataset": "synthetic-small", "indexes": [{"backend": "hnswlib"}]}


@pytest.mark.parametrize(("extra", "field"), [
    ({"index_build": {"threads": 0}}, "index_build.threads"),
    ({"index_build": {"cache_max_mb": 0}}, "index_build.cache_max_mb"),
    ({"index_build": {"size": 3}}, "index_build.size"),
])
def test_bad_spec_fields_are_named(extra, field):
    with pytest.raises(ConfigError) as err:
        parse_spec({**SPEC, **extra}, source="bad.yaml")
    msg = str(err.value)
    assert "bad.yaml" in msg and field in msg and msg.count("\n") == 0


def test_bad_build_threads_on_the_command_line(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps(SPEC))
    assert main(["sweep", str(spec), "--build-threads", "0", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and "--build-threads" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("backend", ["hnswlib", "faiss-hnsw", "faiss-ivf"])
def test_build_or_load_with_custom_ids_as_the_study_uses_it(ds, tmp_path, backend):
    """The study's retrieval leg: create_index + build_or_load over vectors with custom ids
    (no dataset fingerprint: the vectors and ids are hashed)."""
    from retrieval.indexes import create_index
    from retrieval.indexes.buildcache import build_or_load

    params = {"nlist": 16} if backend == "faiss-ivf" else HNSW
    ids = np.arange(ds.n_base, dtype=np.int64) * 3 + 7
    cache = IndexCache(CacheSettings(root=tmp_path))
    results = []
    for attempt in range(2):
        index = create_index(backend, ds.dim, ds.metric, params)
        info, outcome = build_or_load(cache, index, ds.base, ids)
        assert outcome.cache == ("miss", "hit")[attempt] and info.n == ds.n_base
        results.append(index.search(ds.queries, 10))
        index.close()
    np.testing.assert_array_equal(results[0].ids, results[1].ids)
    assert set(np.unique(results[1].ids)) <= set(ids.tolist())
    # other ids are another entry
    index = create_index(backend, ds.dim, ds.metric, params)
    assert build_or_load(cache, index, ds.base, ids + 1)[1].cache == "miss"


def test_unusable_rwb_cache_dir_lists_nothing_and_builds(ds, tmp_path, monkeypatch, capsys,
                                                         caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.delenv("RWB_INDEX_CACHE_DIR", raising=False)
    monkeypatch.setenv("RWB_CACHE_DIR", str(blocker / "rwb"))
    assert main(["cache", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == []
    from retrieval.groundtruth.exact import ground_truth

    gt = ground_truth(ds, 10, cache=tmp_path / "gt", use_cache=False)
    ev = Evaluator(ds, 10, warmup=0, batch_repeats=1, gt=gt)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        built = ev.build("hnswlib", HNSW)
    ev.close()
    assert built.outcome.cache == "miss" and not built.outcome.stored
    assert any("cannot write to" in w for w in warnings_of(caplog))
