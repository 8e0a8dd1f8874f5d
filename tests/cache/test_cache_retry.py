"""Bounded retry of Redis calls (retrieval.cache.redis.retry_transient) and the one-line loss
message of `rwb tune cache`; the real outage is in tests/cache/test_cache_tune_outage.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from retrieval.cache.redis import RedisLost, connect_redis, lost_or_none, retry_transient
from retrieval.cli import main
from retrieval.errors import BackendError


def _flaky(failures: int, exc: Exception) -> tuple[list[int], object]:
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise exc
        return "ok"

    return calls, fn


def test_outage_retried_with_backoff_then_succeeds() -> None:
    calls, fn = _flaky(2, ConnectionRefusedError("refused"))
    t0 = time.perf_counter()
    assert retry_transient(fn, retries=3, backoff_s=0.02) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 3
    assert time.perf_counter() - t0 >= 0.02 + 0.04  # 0.02, then doubled


def test_retries_spent_raise_the_last_error_and_other_errors_pass_at_once() -> None:
    calls, fn = _flaky(10, ConnectionResetError("reset"))
    with pytest.raises(ConnectionResetError):
        retry_transient(fn, retries=2, backoff_s=0.001)  # type: ignore[arg-type]
    assert len(calls) == 3
    calls, fn = _flaky(10, ValueError("not an outage"))
    with pytest.raises(ValueError):
        retry_transient(fn, retries=5, backoff_s=0.001)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_lost_or_none_names_the_phase() -> None:
    lost = lost_or_none(TimeoutError("timed out"), "redis://127.0.0.1:1", "the fill")
    assert isinstance(lost, RedisLost)
    assert str(lost) == "Redis at redis://127.0.0.1:1 went away during the fill"
    gone = lost_or_none(RuntimeError("Unknown index name"), "redis://h:2", "the KNN fetch")
    assert str(gone) == "Redis at redis://h:2 restarted (the index vanished) during the KNN fetch"
    assert lost_or_none(ValueError("bad"), "redis://h:2", "x") is None


@pytest.fixture
def garbage_server() -> Iterator[Callable[[bytes], int]]:
    """A loopback TCP server that answers every connection with fixed bytes (not Redis)."""
    sockets: list[socket.socket] = []

    def serve(reply: bytes) -> int:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        sockets.append(srv)

        def loop() -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(4096)
                    conn.sendall(reply)

        threading.Thread(target=loop, daemon=True).start()
        return int(srv.getsockname()[1])

    yield serve
    for s in sockets:
        s.close()


@pytest.mark.parametrize(("reply", "needle"), [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "does not speak the Redis protocol"),
    (b"$5\r\nhello\r\n", "does not speak the Redis protocol"),
    (b":1\r\n", "does not speak the Redis protocol"),
    (b"-ERR unknown command 'PING'\r\n", "refused PING (unknown command"),
])
def test_a_server_that_is_not_redis_is_one_backend_error(
    garbage_server: Callable[[bytes], int], reply: bytes, needle: str
) -> None:
    port = garbage_server(reply)
    with pytest.raises(BackendError) as info:
        connect_redis(f"redis://127.0.0.1:{port}", connect_timeout_s=1, socket_timeout_s=1)
    text = str(info.value)
    assert f"127.0.0.1:{port}" in text and needle in text and "\n" not in text


def test_cli_tune_cache_against_a_non_redis_server(
    garbage_server: Callable[[bytes], int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval.paths import data_dir

    if not (data_dir() / "gptcache_qqp").is_dir():
        pytest.skip("shared QQP data absent")
    port = garbage_server(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("pairs: {limit: 100}\n")
    url = f"redis://u:hunter2@127.0.0.1:{port}"
    assert main(["tune", "cache", str(spec), "--redis-url", url, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rwb: error: the server at redis://***@127.0.0.1:{port} does not "
                          f"speak the Redis protocol")
    assert len(err.strip().splitlines()) == 1 and "hunter2" not in err
    assert not (tmp_path / "o").exists()
