"""``--executor ray`` without a cluster: the resource request of a unit's task, the executor
checks (one line each), and the task body run in this process against a SQLite study (what each
Ray task does on its node), including a unit whose worker died."""

from __future__ import annotations

import json
import socket
import sys

import pytest

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.cli import main
from retrieval.errors import ConfigError
from retrieval.testing.fake import fake_recall
from retrieval.tune import trials as tr
from retrieval.tune.cluster import (
    PROCESS_BYTES,
    TaskJob,
    backend_modules,
    check_executor,
    index_bytes,
    require_ray,
    run_unit_task,
    task_resources,
    task_threads,
)
from retrieval.tune.spec import parse_spec
from retrieval.tune.target import solve
from retrieval.tune.units import plan_units, trial_params
from tests.helpers import point_keys

RANGE = (1, 24)
TARGET = 0.8


def spec_doc(**over: object) -> dict:
    doc: dict = {
        "name": "cluster", "dataset": "synthetic-small", "k": 10, "warmup": 0,
        "batch_repeats": 1, "target_recall": TARGET,
        "indexes": [{"backend": "fake",
                     "build": {"quality": [1.0, 0.5], "half_ef": 4, "us_per_ef": 0.0},
                     "search": {"ef_search": 8}}],
        "tune": {"strategy": "target", "search_range": {"ef_search": list(RANGE)}},
    }
    doc.update(over)
    return doc


def hnsw_spec(threads: int | None, m: int) -> object:
    return parse_spec(spec_doc(
        index_build={"threads": threads} if threads else {},
        indexes=[{"backend": "hnswlib", "build": {"M": m, "ef_construction": 40},
                  "search": {"ef_search": 10}}],
        tune={"strategy": "target", "search_range": {"ef_search": [10, 64]}}))


def test_task_asks_for_the_build_threads_and_the_expected_memory():
    pytest.importorskip("hnswlib")
    small, big = hnsw_spec(4, 8), hnsw_spec(4, 48)
    unit_s, unit_b = plan_units(small, "target")[0], plan_units(big, "target")[0]
    n, nq, dim = 1_000_000, 1000, 96
    req = task_resources(small, unit_s, n, dim, nq)
    assert req.cpus == 4 and req.ray_options() == {"num_cpus": 4, "memory": req.memory_bytes}
    data = (n + nq) * dim * 4 + nq * 10 * 12
    assert req.data_bytes == data
    assert req.memory_bytes == PROCESS_BYTES + data + req.index_bytes
    # hnswlib's own estimate: the vectors plus 2*M links of 4 bytes a vector (and more)
    assert n * (dim * 4 + 2 * 8 * 4) < req.index_bytes < 1.3 * n * (dim * 4 + 2 * 8 * 4 + 16)
    assert index_bytes(big, unit_b, n, dim) - req.index_bytes > n * 2 * 40 * 4  # grows with M


def test_task_threads_default_to_the_search_threads_not_every_cpu():
    assert task_threads(parse_spec(spec_doc())) == 1
    assert task_threads(parse_spec(spec_doc(threads=3))) == 3
    assert task_threads(parse_spec(spec_doc(threads=2, index_build={"threads": 6}))) == 6


def test_a_backend_without_an_estimate_gets_the_generic_one():
    spec = parse_spec(spec_doc())
    unit = plan_units(spec, "target")[0]
    assert index_bytes(spec, unit, 1000, 32) == 2 * 1000 * 32 * 4 + 64 * 1000
    assert backend_modules(spec) == ["retrieval.testing.fake"]  # imported by every task


@pytest.mark.parametrize("over, in_memory, words", [
    ({"tune": {"strategy": "optuna", "n_trials": 2}}, False, "strategy 'optuna'"),
    ({}, True, "every node loads the dataset itself"),
])
def test_executor_ray_refuses_what_it_cannot_run(over, in_memory, words):
    with pytest.raises(ConfigError, match=words):
        check_executor("ray", parse_spec(spec_doc(**over)), in_memory=in_memory)
    check_executor("local", parse_spec(spec_doc(**over)), in_memory=in_memory)  # unchanged
    with pytest.raises(ConfigError, match="unknown executor 'dask'; allowed: local, ray"):
        check_executor("dask", parse_spec(spec_doc()), in_memory=False)


def test_missing_ray_is_one_line_with_the_install_hint(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ConfigError, match=r"Ray is not installed; .*\[ray\]"):
        require_ray()
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec_doc()))
    assert main(["sweep", str(path), "--executor", "ray", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--executor ray: Ray is not installed" in err[0]
    assert not (tmp_path / "r").exists()  # refused before any run folder or study


def test_ray_address_without_ray_executor_is_refused(tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec_doc()))
    assert main(["sweep", str(path), "--ray-address", "127.0.0.1:1", "--out",
                 str(tmp_path / "r")]) == 2
    assert "--ray-address applies to --executor ray only" in capsys.readouterr().err


def test_a_ray_address_where_nothing_listens_or_not_an_address_is_one_line(tmp_path, capsys):
    """Issue 34 MEDIUM 6: nothing listening: exit 3 (not reachable) at once, where Ray retried
    for minutes with the manifest left "running"; not an address: exit 2."""
    pytest.importorskip("ray")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec_doc()))
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["sweep", str(path), "--executor", "ray", "--ray-address",
                 f"127.0.0.1:{port}", "--out", str(tmp_path / "r")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not measurable here" in err[0] and str(port) in err[0], err
    assert not (tmp_path / "r").exists()  # no run folder, no manifest left "running"
    assert main(["sweep", str(path), "--executor", "ray", "--ray-address", "not an address",
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected 'auto', 'local', HOST:PORT" in err[0], err
    assert "'not an address'" in err[0] and not (tmp_path / "r").exists()


def _study(spec, url):
    """A study as the driver of --executor ray leaves it: created, bound to the spec."""
    from retrieval.loaders.catalog import resolve_dataset
    from retrieval.tune.optuna_search import make_sampler
    from retrieval.tune.spec import resolved
    from retrieval.tune.storage import open_storage, open_study, spec_document

    ds = resolve_dataset(spec.dataset)
    opened = open_storage(url)
    study, created = open_study(opened, spec.name, spec_document(resolved(spec), ds.fingerprint),
                                direction="minimize", sampler=make_sampler(spec.tune, spec.seed))
    assert created
    return study, opened


def test_task_body_runs_its_unit_and_takes_over_a_dead_workers_trial(tmp_path):
    spec = parse_spec(spec_doc())
    plan = plan_units(spec, "target")
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study, opened = _study(spec, url)
    # unit 0 was being measured by a worker that died (this host, a pid that is not running)
    dead = tr.Book(study, opened.storage, f"{socket.gethostname()}:999999999:1.00")
    first = plan[0].next_point({})
    stale = dead.create_running(plan[0], first, trial_params(spec, plan[0], first, ["fake"]))
    for unit in plan:
        job = TaskJob(spec, "synthetic-small", url, spec.name, tr.unit_to_dict(unit),
                      tuple(backend_modules(spec)), poll_s=0.05)
        result = run_unit_task(job)
        assert result["unit"] == unit.key and result["units_run"] == 1
    book = tr.Book(study, opened.storage, "reader")
    done = book.done()
    for unit in plan:
        q = unit.build["quality"]
        want = solve(*RANGE, lambda ef, q=q: fake_recall(ef, q, 10, 4) >= TARGET)
        got = done[unit.key].chosen
        assert (None if got is None else got.search) == (
            None if want.value is None else {"ef_search": want.value})
        assert len(book.points(unit.key)) == want.evaluations  # none twice, none lost
    trial = next(t for t in book.trials() if t._trial_id == stale)
    assert trial.state.name == "FAIL" and "stale" in trial.user_attrs[tr.NOTE]
    spent = [t.user_attrs[tr.NODE_S] for t in book.trials() if t.state.name == "COMPLETE"]
    assert spent and all(s >= 0 for s in spent)  # node time recorded on every measured point


DIE_AFTER_DECIDING = """
import json, os, signal, sys
import retrieval.testing.fake
from retrieval.tune import trials as tr
from retrieval.tune.cluster import TaskJob, backend_modules, run_unit_task
from retrieval.tune.spec import parse_spec
from retrieval.tune.units import plan_units
spec = parse_spec(json.loads(sys.argv[1]))
unit = plan_units(spec, "target")[0]
real = tr.Book.mark_done
def mark_done_then_die(self, u, result):  # the node dies once the unit is decided
    real(self, u, result)
    os.kill(os.getpid(), signal.SIGKILL)
tr.Book.mark_done = mark_done_then_die
run_unit_task(TaskJob(spec, "synthetic-small", sys.argv[2], spec.name, tr.unit_to_dict(unit),
                      tuple(backend_modules(spec)), poll_s=0.05))
"""


def test_a_task_killed_once_its_unit_is_decided_loses_no_probe(tmp_path):
    """The Ray node-loss defect (issue 34 pin 7): a task killed -9 between deciding its unit and
    telling the unit's last trial left that probe FAIL, so the sweep completed one evaluation
    fewer than an in-process run. The point is recorded on its trial before the decision, and
    the retried task completes that trial with its own measurement."""
    import subprocess

    spec = parse_spec(spec_doc())
    plan = plan_units(spec, "target")
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study, opened = _study(spec, url)
    killed = subprocess.run([sys.executable, "-c", DIE_AFTER_DECIDING, json.dumps(spec_doc()),
                             url], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr[-2000:]
    book = tr.Book(study, opened.storage, "reader")
    assert plan[0].key in book.done()  # decided, then killed before its last trial was told
    held = [t for t in book.trials() if t.state.name == "RUNNING"]
    assert len(held) == 1 and held[0].user_attrs[tr.UNIT] == plan[0].key
    for unit in plan:  # Ray's retry of the killed task, then the other unit's task
        job = TaskJob(spec, "synthetic-small", url, spec.name, tr.unit_to_dict(unit),
                      tuple(backend_modules(spec)), poll_s=0.05)
        run_unit_task(job)
    lost = book.storage.get_trial(held[0]._trial_id)
    assert lost.state.name == "COMPLETE" and "died after recording" in lost.user_attrs[tr.NOTE]
    assert lost.user_attrs[tr.RESULT] and lost.values
    import optuna

    got = point_keys(optuna.load_study(study_name=spec.name, storage=url))
    want = [(u.key, json.dumps({"ef_search": ef}, sort_keys=True)) for u in plan
            for ef in solve(*RANGE, lambda ef, q=u.build["quality"]: fake_recall(
                ef, q, 10, 4) >= TARGET).probes]
    assert len(got) == len(set(got)) and sorted(got) == sorted(want)  # each probe once, none lost
    assert not [t for t in book.trials() if t.state.name in ("RUNNING", "WAITING")]
