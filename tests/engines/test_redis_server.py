"""The Redis service helper: start, answer with search, reuse, stop, CLI, bad input."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import redis

from retrieval.engines.redis import server as rs
from retrieval.errors import BackendError, ConfigError
from retrieval.indexes.servers import pid_alive

pytestmark = [pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.skipif(not rs.binaries_available(), reason="redis binaries not installed"),
]


def test_context_manager_starts_search_capable_server_and_stops_it() -> None:
    with rs.redis_server() as srv:
        client = redis.Redis.from_url(srv.url)
        assert client.ping()
        assert client.execute_command("FT._LIST") == []
        modules = {m[b"name"] for m in client.module_list()}
        assert b"search" in modules
        assert client.info("server")["redis_version"].startswith("8.")
        # an overrunning query fails loudly instead of answering partial results (a silent miss)
        conf = dict(client.execute_command("FT.CONFIG", "GET", "*"))
        assert conf[b"ON_TIMEOUT"] == b"fail" and conf[b"TIMEOUT"] == b"10000"
        client.close()
        pid = srv.pid
    assert not pid_alive(pid)
    assert not srv.pidfile.exists()


def test_cli_start_reuse_status_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "svc")
    port = rs.free_port()
    assert rs.main(["start", "--dir", d, "--port", str(port)]) == 0
    assert capsys.readouterr().out.strip() == f"REDIS_URL=redis://127.0.0.1:{port}"
    first = rs.running_server(d)
    assert first is not None
    # a second start on the same dir reuses the live server
    assert rs.main(["start", "--dir", d]) == 0
    assert capsys.readouterr().out.strip() == f"REDIS_URL=redis://127.0.0.1:{port}"
    again = rs.running_server(d)
    assert again is not None and again.pid == first.pid
    assert rs.main(["status", "--dir", d]) == 0
    capsys.readouterr()
    assert rs.main(["stop", "--dir", d]) == 0
    assert capsys.readouterr().out.strip() == "stopped"
    assert not pid_alive(first.pid)
    assert rs.main(["stop", "--dir", d]) == 0
    assert capsys.readouterr().out.strip() == "not running"
    assert rs.main(["status", "--dir", d]) == 1


def test_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(BackendError, match=f"port {port} .* already in use"):
            rs.start_redis(tmp_path, port)


def test_bad_port_and_missing_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"field 'port' must be in 1\.\.65535; received 70000"):
        rs.start_redis(tmp_path, 70000)
    monkeypatch.setenv(rs.ENV_SERVER, str(tmp_path / "nope" / "redis-server"))
    with pytest.raises(BackendError, match=r"no redis-server binary found in \$RWB_REDIS_SERVER"):
        rs.find_binaries()
    assert not rs.binaries_available()


def test_kill_simulates_a_crash() -> None:
    with rs.redis_server() as srv:
        srv.kill()
        assert not srv.is_alive()
        with pytest.raises(redis.ConnectionError):
            rs._client(srv.host, srv.port).ping()
