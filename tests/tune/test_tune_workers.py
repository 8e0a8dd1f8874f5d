"""Real `rwb sweep` processes sharing one Optuna storage, and a sweep killed with SIGKILL then
resumed: no trial duplicated, none lost, every finished trial kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
import yaml

from retrieval.testing.fake import fake_recall
from retrieval.tune.target import solve
from tests.helpers import chosen_searches, point_keys

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

QUALITIES = [1.0, 1.2, 0.5]
RANGE = (1, 24)
TARGET = 0.8
LAUNCH = "import sys, retrieval.testing.fake; from retrieval.cli import main; sys.exit(main())"


def outcomes() -> dict[float, object]:
    return {q: solve(*RANGE, lambda ef, q=q: fake_recall(ef, q, 10, 4) >= TARGET)
            for q in QUALITIES}


def expected_evaluations() -> int:
    return sum(o.evaluations for o in outcomes().values())


def expected_choice() -> dict[float, dict | None]:
    return {q: None if o.value is None else {"ef_search": o.value} for q, o in outcomes().items()}


def write_spec(tmp: Path, us_per_ef: float) -> Path:
    spec = {
        "name": "workers",
        "dataset": "synthetic-small",
        "k": 10,
        "warmup": 2,
        "batch_repeats": 1,
        "target_recall": TARGET,
        "indexes": [{
            "backend": "fake",
            "build": {"quality": QUALITIES, "half_ef": 4, "us_per_ef": us_per_ef},
            "search": {"ef_search": 8},
        }],
        "tune": {"strategy": "target", "search_range": {"ef_search": list(RANGE)}},
    }
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def sweep(spec: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-c", LAUNCH, "sweep", str(spec), "--json", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def load(storage: object) -> optuna.Study:
    return optuna.load_study(study_name="workers", storage=storage)


def journal(path: Path) -> object:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str(path)))



@pytest.mark.parametrize("kind", ["sqlite", "journal",
                                  pytest.param("postgres", marks=pytest.mark.pgvector)])
def test_two_workers_share_one_study(tmp_path, kind, request):
    spec = write_spec(tmp_path, us_per_ef=20.0)
    if kind == "postgres":  # Optuna's RDBStorage on a real PostgreSQL (psycopg 3 driver)
        url = storage = request.getfixturevalue("pg_storage_url")
    elif kind == "sqlite":
        url, storage = f"sqlite:///{tmp_path / 'shared.db'}", f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        url, storage = f"journal:{tmp_path / 'shared.log'}", journal(tmp_path / "shared.log")
    procs = [sweep(spec, "--storage", url, "--study", "workers", "--out", str(tmp_path / f"w{i}"))
             for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    study = load(storage)
    keys = point_keys(study)
    assert len(keys) == len(set(keys)) == expected_evaluations()  # none twice, none lost
    states = Counter(t.state.name for t in study.trials)
    assert set(states) == {"COMPLETE"}, states
    summaries = [json.loads(out) for out, _ in outs]
    assert chosen_searches(summaries[0]) == chosen_searches(summaries[1]) == expected_choice()
    assert expected_choice()[1.0] == {"ef_search": 16} and expected_choice()[0.5] is None


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.pgvector)])
def test_sigkill_then_resume_keeps_every_finished_trial(tmp_path, kind, request):
    spec = write_spec(tmp_path, us_per_ef=150.0)  # ~0.1-0.2 s per measured config
    out = tmp_path / "run"
    db = f"sqlite:///{out / 'study.db'}"
    storage: tuple[str, ...] = ()
    if kind == "postgres":  # the study in a PostgreSQL database instead of the run's SQLite
        db = request.getfixturevalue("pg_storage_url")
        storage = ("--storage", db, "--study", "workers")
    proc = sweep(spec, "--out", str(out), *storage)
    deadline = time.monotonic() + 300
    finished: dict[int, tuple] = {}
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.3)
        try:
            trials = load(db).trials
        except Exception:  # the study is not created yet
            continue
        finished = {
            t.number: (t.params, t.values, t.user_attrs.get("rwb:result"))
            for t in trials if t.state == optuna.trial.TrialState.COMPLETE
        }
        if len(finished) >= 4:
            break
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = {t.number: t for t in load(db).trials}
    finished = {n: v for n, v in finished.items() if n in before}
    assert len(finished) >= 4
    assert any(t.state == optuna.trial.TrialState.RUNNING for t in before.values())

    resumed = sweep(spec, "--out", str(out), *storage)
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    after = {t.number: t for t in load(db).trials}
    for n, (params, values, result) in finished.items():  # kept, unchanged
        t = after[n]
        assert t.state == optuna.trial.TrialState.COMPLETE
        assert (t.params, t.values, t.user_attrs.get("rwb:result")) == (params, values, result)
    for n, t in before.items():  # the trial in flight when killed is failed, not lost silently
        if t.state == optuna.trial.TrialState.RUNNING:  # (completed when its point was recorded)
            assert after[n].state.name == ("COMPLETE" if "rwb:recorded" in t.system_attrs
                                           else "FAIL"), n
            assert "stale" in after[n].user_attrs["rwb:note"]
    keys = point_keys(load(db))
    assert len(keys) == len(set(keys)) == expected_evaluations()
    assert not [t for t in after.values() if t.state.name in ("RUNNING", "WAITING")]
    assert chosen_searches(json.loads(stdout)) == expected_choice()
