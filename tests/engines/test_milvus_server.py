"""Milvus Lite in its own process (``milvus_lite_server``), reached by URI."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason="pymilvus not installed (extra 'milvus')")
pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")

from retrieval.engines.milvus.index import MilvusIndex
from retrieval.engines.milvus.params import FlatBuild
from retrieval.engines.milvus.server import free_port, milvus_lite_server
from retrieval.errors import BackendError, ConfigError
from retrieval.groundtruth.exact import exact_knn
from retrieval.indexes import create_index
from retrieval.loaders.synthetic import make_synthetic
from retrieval.stats.metrics import recall_by_id

pytestmark = [pytest.mark.slow, pytest.mark.milvus]


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_server_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = make_synthetic(1000, 16, 30, seed=3)
    gt = exact_knn(ds.base, ds.queries, "l2", 10, threads=1).ids
    data = tmp_path / "srv"
    with milvus_lite_server(data) as uri:
        port = int(uri.rsplit(":", 1)[1])
        assert uri.startswith("http://127.0.0.1:") and _port_open(port)
        monkeypatch.setenv("RWB_MILVUS_URI", uri)  # the environment route to a server
        idx = create_index("milvus", ds.dim, "l2", {"index_type": "IVF_FLAT", "nlist": 16})
        assert isinstance(idx, MilvusIndex) and not idx.embedded
        try:
            info = idx.build(ds.base)
            assert info.extra["mode"] == "server" and info.memory_bytes is None
            assert idx.verify_index_params()["params"] == {"nlist": 16}
            idx.set_search_params(nprobe=16)
            rec = recall_by_id(idx.search(ds.queries, 10).ids, gt, 10).mean()
            assert rec >= 0.99
            check = idx.verify_not_brute_force(ds.queries, 10, gt)
            assert check.recall_low < check.recall_high
            with pytest.raises(BackendError, match="cannot be measured"):
                idx.memory_bytes()
        finally:
            idx.close()
        assert (data / "LOCK").exists()  # the server holds its data dir
    deadline = time.monotonic() + 5
    while _port_open(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _port_open(port)
    from milvus_lite import MilvusLite

    MilvusLite(str(data)).close()  # the lock was released on stop


def test_port_in_use_fails_with_the_uri(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(BackendError) as err, milvus_lite_server(tmp_path / "d", port=port):
            pass
    assert f"http://127.0.0.1:{port}" in str(err.value)


def test_bad_arguments(tmp_path: Path) -> None:
    for port in (0, 70000):
        with pytest.raises(ConfigError, match="'port'"), milvus_lite_server(tmp_path, port=port):
            pass
    with pytest.raises(ConfigError, match="'threads'"), milvus_lite_server(tmp_path, threads=0):
        pass
    assert 1 <= free_port() <= 65535


def test_embedded_and_server_answer_alike(tmp_path: Path) -> None:
    """Same data, same build, same answers in-process and out of process (FLAT: exact)."""
    ds = make_synthetic(400, 8, 10, seed=4)
    answers = []
    with milvus_lite_server(tmp_path / "srv") as uri:
        for target in (None, uri):
            idx = MilvusIndex(ds.dim, "cosine", FlatBuild(), uri=target, workdir=tmp_path)
            try:
                idx.build(ds.base)
                answers.append(idx.search(ds.queries, 5))
            finally:
                idx.close()
    assert np.array_equal(answers[0].ids, answers[1].ids)
    np.testing.assert_allclose(answers[0].distances, answers[1].distances, rtol=1e-5)
