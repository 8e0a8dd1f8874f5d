"""The qdrant and redis backends against their real engines: the brute-force traps are caught,
limits are checked before the engine sees them (one line each), a Redis that is down is one
line naming the URL without its password, and `rwb backends --json` lists both."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from retrieval.cli import main
from retrieval.errors import BackendError, ConfigError
from retrieval.indexes import create_index
from retrieval.loaders.synthetic import make_synthetic
from retrieval.testing.conformance import exact_neighbours
from tests.helpers import dead_port, one_line

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

pytest.importorskip("qdrant_edge", reason="qdrant-edge-py not installed (extra 'qdrant')")
needs_redis = pytest.mark.skipif(not os.environ.get("REDIS_URL"),
                                 reason="REDIS_URL not set (make test starts a Redis)")
K = 10


@pytest.fixture(scope="module")
def data():
    ds = make_synthetic(2000, 16, 40, seed=3, cluster_spread=3)
    return ds, exact_neighbours(ds, K)[0]



def test_rwb_backends_lists_both_as_available(capsys):
    assert main(["backends", "--json"]) == 0
    rows = {b["name"]: b for b in json.loads(capsys.readouterr().out)}
    assert rows["qdrant"]["available"] and rows["qdrant"]["version"].startswith("qdrant-edge-py")
    assert rows["redis"]["available"] and rows["redis"]["family"] == "hnsw"


# --- qdrant ---------------------------------------------------------------------------------


def test_qdrant_recall_moves_with_hnsw_ef(data):
    ds, exact = data
    with_index = create_index("qdrant", ds.dim, ds.metric, {"m": 4, "ef_construct": 8})
    try:
        info = with_index.build(ds.base)
        assert info.extra["indexed_vectors"] == ds.n_base  # the optimizer did index it
        assert info.memory_bytes and info.memory_bytes >= ds.n_base * ds.dim * 4
        check = with_index.verify_not_brute_force(ds.queries, K, exact)
        assert check.ok and check.recall_low < check.recall_high
    finally:
        with_index.close()


def test_qdrant_full_scan_is_caught(data):
    """A full_scan_threshold above the collection's size makes Qdrant answer by full scan
    (exact at every hnsw_ef): the brute-force check refuses it."""
    ds, exact = data
    index = create_index("qdrant", ds.dim, ds.metric,
                         {"m": 4, "ef_construct": 8, "full_scan_threshold": 10**7})
    try:
        index.build(ds.base)
        with pytest.raises(BackendError) as e:
            index.verify_not_brute_force(ds.queries, K, exact)
        one_line(e, "brute force", "full_scan_threshold 10000000 KB")
    finally:
        index.close()


def test_qdrant_unindexed_collection_is_refused(data):
    """Qdrant's default-sized indexing_threshold leaves a small collection unindexed."""
    ds, _ = data
    index = create_index("qdrant", ds.dim, ds.metric, {"indexing_threshold": 10000})
    try:
        with pytest.raises(BackendError) as e:
            index.build(ds.base)
        one_line(e, f"of {ds.n_base} vectors", "indexing_threshold 10000 KB")
    finally:
        index.close()


@pytest.mark.parametrize(("build", "needles"), [
    ({"m": 1}, ["'m'", ">= 2", "received 1"]),
    ({"ef_construct": 2}, ["'ef_construct'", ">= 4"]),
    ({"quantization": "scalar4"}, ["'quantization'", "received 'scalar4'"]),
    ({"quantile": 0.99}, ["'quantile'", "unless quantization is 'scalar'"]),
    ({"pq_compression": "x16"}, ["'pq_compression'", "unless quantization is 'product'"]),
    ({"indexing_threshold": 0}, ["'indexing_threshold'", ">= 1"]),
])
def test_qdrant_build_limits(build, needles):
    with pytest.raises(ConfigError) as e:
        create_index("qdrant", 16, "l2", build)
    one_line(e, *needles)


def test_qdrant_search_limits_and_dimension(data):
    ds, _ = data
    with pytest.raises(ConfigError) as e:
        create_index("qdrant", 70000, "l2")
    one_line(e, "'dim'", "[1, 65536]", "received 70000")
    with pytest.raises(ConfigError) as e:
        create_index("qdrant", 16, "hamming")
    one_line(e, "'metric'", "received 'hamming'")
    index = create_index("qdrant", ds.dim, ds.metric, {"m": 4, "ef_construct": 8})
    try:
        index.build(ds.base[:200])
        index.set_search_params(hnsw_ef=5)
        with pytest.raises(ConfigError) as e:
            index.search(ds.queries[:2], K)
        one_line(e, "'hnsw_ef'", ">= k (10)", "received 5")
        index.set_search_params(hnsw_ef=10, oversampling=2.0)
        with pytest.raises(ConfigError) as e:
            index.search(ds.queries[:2], K)
        one_line(e, "'oversampling'", "quantization is 'none'")
    finally:
        index.close()


def test_qdrant_quantization_knobs(data):
    """Product quantization without rescoring loses recall; rescore + oversampling restore it."""
    ds, exact = data
    index = create_index("qdrant", ds.dim, ds.metric,
                         {"m": 8, "ef_construct": 32, "quantization": "product",
                          "pq_compression": "x16"})
    try:
        index.build(ds.base)
        rec = {}
        for rescore, over in ((False, 1.0), (True, 4.0)):
            index.set_search_params(hnsw_ef=128, rescore=rescore, oversampling=over)
            got = index.search(ds.queries, K).ids
            rec[rescore] = np.mean([len(set(a) & set(b)) / K for a, b in zip(got, exact)])
        assert rec[True] > rec[False]
    finally:
        index.close()


# --- redis ----------------------------------------------------------------------------------



def test_redis_down_at_start_is_one_line_without_the_password(data):
    ds, _ = data
    url = f"redis://bob:hunter2@127.0.0.1:{dead_port()}/0"
    from retrieval.engines.redis.index import RedisIndex

    index = RedisIndex(ds.dim, ds.metric, url=url)
    with pytest.raises(BackendError) as e:
        index.build(ds.base)
    text = one_line(e, "cannot reach Redis at redis://***@127.0.0.1:")
    assert "hunter2" not in text and "bob" not in text
    index.close()


def test_redis_url_unset_is_one_line(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    with pytest.raises(BackendError) as e:
        create_index("redis", 16, "l2")
    one_line(e, "set REDIS_URL")


def test_redis_down_through_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REDIS_URL", f"redis://:s3cret@127.0.0.1:{dead_port()}")
    spec = tmp_path / "s.yaml"
    spec.write_text("name: r\ndataset: synthetic-small\nk: 10\nwarmup: 2\nbatch_repeats: 1\n"
                    "indexes:\n  - {backend: redis, search: {EF_RUNTIME: 20}}\n")
    assert main(["eval", str(spec), "--out", str(tmp_path / "o")]) == 3  # not measurable here
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach Redis at redis://***@127.0.0.1" in err
    assert "s3cret" not in err


@pytest.mark.parametrize(("build", "needles"), [
    ({"M": 1}, ["'M'", ">= 2", "received 1"]),
    ({"M": 5000}, ["'M'", "<= 1024"]),
    ({"EF_CONSTRUCTION": 0}, ["'EF_CONSTRUCTION'", ">= 1"]),
    ({"algorithm": "IVF"}, ["'algorithm'", "received 'IVF'"]),
    ({"EPSILON": 0}, ["'EPSILON'", "> 0"]),
])
def test_redis_build_limits(build, needles, monkeypatch):
    monkeypatch.setenv("REDIS_URL", os.environ.get("REDIS_URL") or "redis://127.0.0.1:1")
    with pytest.raises(ConfigError) as e:
        create_index("redis", 16, "l2", build)
    one_line(e, *needles)


@needs_redis
def test_redis_hnsw_knob_flat_exact_and_memory(data):
    ds, exact = data
    hnsw = create_index("redis", ds.dim, ds.metric, {"M": 4, "EF_CONSTRUCTION": 8})
    flat = create_index("redis", ds.dim, ds.metric, {"algorithm": "FLAT"})
    try:
        info = hnsw.build(ds.base)
        assert info.extra["ft_info"]["num_docs"] in (ds.n_base, str(ds.n_base))
        assert info.memory_bytes and info.memory_bytes > ds.n_base * ds.dim * 4 // 2
        check = hnsw.verify_not_brute_force(ds.queries, K, exact)
        assert check is not None and check.ok and check.recall_low < check.recall_high
        hnsw.set_search_params(EF_RUNTIME=9)
        with pytest.raises(ConfigError) as e:
            hnsw.search(ds.queries[:2], K)
        one_line(e, "'EF_RUNTIME'", ">= k (10)", "received 9")
        flat.build(ds.base)
        got = flat.search(ds.queries, K).ids
        assert np.mean([len(set(a) & set(b)) / K for a, b in zip(got, exact)]) == 1.0
        assert type(flat).monotone_knobs_for(flat.build_params) == ()
        assert flat.verify_not_brute_force(ds.queries, K, exact) is None
    finally:
        hnsw.close()
        flat.close()
