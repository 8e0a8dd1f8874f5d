"""`rwb tune cache` when its real Redis goes away or restarts in the middle of the fill: exit 2
with one line saying what was lost, no traceback, no run directory, no key left behind, and a
later run on the same server works."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from retrieval.engines.redis.server import RedisServer, port_in_use, start_redis
from retrieval.paths import data_dir

pytestmark = [pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.skipif(not (data_dir() / "gptcache_qqp").is_dir(),
                       reason=f"shared data folder {data_dir() / 'gptcache_qqp'} is absent"),
]
ROOT = Path(__file__).resolve().parents[2]
NAME = "rwb-test-outage"
SPEC = {
    "name": "qqp-cache-outage",
    "pairs": {"limit": 2000, "seed": 0},
    "cache": {"name": NAME, "load_batch": 100},
    "latency": {"sizes": [3000], "queries": 50, "warmup": 5},
    "tuning": {"max_false_hit": 0.05},
}


def _tune(spec: Path, url: str, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "retrieval", "tune", "cache", str(spec), "--redis-url", url,
         "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _when_filled(srv: RedisServer, at: int, action: Any) -> threading.Thread:
    """A thread that runs ``action()`` once the server holds ``at`` keys."""
    client = redis.Redis(host=srv.host, port=srv.port)

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if client.dbsize() >= at:
                action(client)
                return
            time.sleep(0.002)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _leftovers(url: str) -> tuple[list[bytes], list[Any]]:
    client = redis.Redis.from_url(url)
    return list(client.scan_iter(match=f"{NAME}*")), list(client.execute_command("FT._LIST"))


def _written(err: str) -> tuple[int, int]:
    m = re.search(r"\(([\d,]+) of ([\d,]+) entries written\)", err)
    assert m, err
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def test_shutdown_mid_fill_one_line_then_a_new_run_works(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))

    def shutdown(client: redis.Redis) -> None:
        with contextlib.suppress(redis.ConnectionError):  # the server closes it as it goes
            client.shutdown(nosave=True)

    watcher = _when_filled(private_redis, 1000, shutdown)
    proc = _tune(spec, private_redis.url, tmp_path / "run1")
    out, err = proc.communicate(timeout=300)
    watcher.join(5)
    assert proc.returncode == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"rwb: error: Redis at {private_redis.url} went away during the fill ")
    written, total = _written(err)
    # the server held 1,000 keys when it was shut down; the client counts the batches it saw
    # acknowledged, so the last batch in flight may be missing from its count
    assert 0 < written < total
    assert (f"the index '{NAME}' and its keys could not be dropped" in err
            and "`rwb services cleanup --yes` removes them" in err), err
    assert not (tmp_path / "run1").exists()  # nothing was kept

    # the same server, started again: a new run works (no "Unknown index name") and cleans up
    deadline = time.monotonic() + 10
    while private_redis.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    srv = start_redis(private_redis.dir, private_redis.port)
    try:
        proc = _tune(spec, srv.url, tmp_path / "run2")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "threshold" in out and (tmp_path / "run2" / "summary.json").is_file()
        assert _leftovers(srv.url) == ([], [])  # a successful run leaves no key, no index
    finally:
        srv.stop()


def test_restart_mid_fill_drops_what_was_written(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    """Killed and started again while the fill is between batches: the writes after the restart
    (keys with no index) are found, the run ends with one line, and every key is dropped."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    restarted: list[RedisServer] = []

    def restart(client: redis.Redis) -> None:
        private_redis.kill()
        deadline = time.monotonic() + 5  # a forked child (RediSearch's GC) may hold the port
        while port_in_use(private_redis.port) and time.monotonic() < deadline:
            time.sleep(0.01)
        restarted.append(start_redis(private_redis.dir, private_redis.port))

    watcher = _when_filled(private_redis, 1500, restart)
    proc = _tune(spec, private_redis.url, tmp_path / "run")
    try:
        _, err = proc.communicate(timeout=300)
        watcher.join(15)
        assert restarted, "the watcher did not restart the server"
        assert proc.returncode == 2, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"rwb: error: Redis at {private_redis.url} restarted (the index "
                              f"vanished) during the fill ")
        written, total = _written(err)
        assert 1500 <= written < total
        assert err.rstrip().endswith("nothing was kept: the index and its keys were dropped")
        assert not (tmp_path / "run").exists()
        assert _leftovers(private_redis.url) == ([], [])  # a failed run leaves no key either
    finally:
        for srv in restarted:
            srv.stop()
