"""Sweep options that had no test: objective ``qps``, the NSGA-II sampler, and stale-worker
detection by heartbeat (a real Optuna storage)."""

from __future__ import annotations

import socket
import time

import optuna
import pytest
from optuna.trial import TrialState

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.errors import ConfigError
from retrieval.testing.fake import fake_recall
from retrieval.tune import trials as tr
from retrieval.tune.config import TuneSpec
from retrieval.tune.optuna_search import make_sampler
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import apply_overrides, run_sweep
from retrieval.tune.target import solve

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

TARGET = 0.8
RANGE = [1, 24]


def fake_spec(build: dict[str, object], **top: object) -> object:
    return parse_spec({
        "name": "fake-options",
        "dataset": "synthetic-small",
        "k": 10,
        "warmup": 2,
        "batch_repeats": 1,
        "target_recall": TARGET,
        "indexes": [{"backend": "fake", "build": {"half_ef": 4, **build},
                     "search": {"ef_search": 8}}],
        **top,
    }, source="options.yaml")


def answer(quality: float) -> int | None:
    return solve(*RANGE, lambda ef: fake_recall(ef, quality, 10, 4) >= TARGET).value


def test_objective_qps_picks_the_highest_batch_qps(tmp_path):
    # both builds meet the target; quality 1.25 needs ef 8, quality 0.875 ef 43: at 200 us per
    # query per unit of ef the first answers a batch several times faster
    wide = (1, 64)
    assert [solve(*wide, lambda ef, q=q: fake_recall(ef, q, 10, 4) >= TARGET).value
            for q in (1.25, 0.875)] == [8, 43]
    spec = fake_spec({"quality": [0.875, 1.25], "us_per_ef": 200.0}, modes=["batch"],
                     batch_repeats=3, tune={"strategy": "target", "objective": "qps",
                                            "search_range": {"ef_search": list(wide)}})
    s = run_sweep(spec, tmp_path).summary
    assert s["objective"] == "qps" and "highest batch QPS" in s["cheapest_rule"]
    builds = {b["build"]["quality"]: b["chosen"] for b in s["builds"]}
    assert builds[1.25]["search"] == {"ef_search": 8}
    assert builds[0.875]["search"] == {"ef_search": 43}
    for c in builds.values():
        assert c["p95_ms"] is None and c["qps"] is not None  # batch mode only: no p95
    # 1.6 ms vs 8.6 ms of (sleep) work per query: a loaded machine slows both, the order holds
    assert builds[1.25]["qps"] > builds[0.875]["qps"]
    chosen = s["backends"]["fake"]["chosen"]
    assert chosen["build"]["quality"] == 1.25
    assert chosen["qps"] == max(c["qps"] for c in builds.values())


def test_p95_objective_is_refused_without_single_mode():
    spec = fake_spec({"quality": 1.0}, modes=["batch"], tune={"strategy": "target"})
    with pytest.raises(ConfigError, match=r"'tune.objective' p95_ms needs mode 'single'"):
        run_sweep(spec, None)


def test_nsga2_sampler_proposes_the_builds(tmp_path):
    assert isinstance(make_sampler(TuneSpec(sampler="nsga2"), 0), optuna.samplers.NSGAIISampler)
    assert isinstance(make_sampler(TuneSpec(), 0), optuna.samplers.TPESampler)
    spec = apply_overrides(
        fake_spec({"quality": [1.0, 0.5], "us_per_ef": 0.0},
                  tune={"sampler": "nsga2", "search_range": {"ef_search": RANGE}}),
        strategy="optuna", n_trials=2,
    )
    res = run_sweep(spec, tmp_path)
    by_q = {b["build"]["quality"]: b for b in res.summary["builds"]}
    assert set(by_q) == {1.0, 0.5}  # both builds proposed (2 trials, 2 distinct builds)
    assert by_q[1.0]["chosen"]["search"] == {"ef_search": answer(1.0)}
    assert by_q[0.5]["infeasible"] and by_q[0.5]["evaluations"] == 1
    study = optuna.load_study(study_name="fake-options",
                              storage=f"sqlite:///{tmp_path / 'study.db'}")
    asked = [t for t in study.trials if "fake.build.quality" in t.params
             and t.user_attrs.get(tr.SEARCH, {}).get("ef_search") == RANGE[1]]
    # the proposals came from NSGA-II (it stamps the trials it samples with its generation)
    assert asked and all("NSGAIISampler:generation" in t.system_attrs for t in asked)


# --- stale workers ------------------------------------------------------------------------------
@pytest.fixture
def book(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'hb.db'}", study_name="hb")
    return tr.Book(study, study._storage, tr.this_worker())


def running_trial(book: tr.Book, owner: str, unit: str) -> int:
    tid = int(book.storage.create_new_trial(book.study._study_id))
    book.storage.set_trial_system_attr(tid, tr.WORKER, owner)
    book.storage.set_trial_user_attr(tid, tr.UNIT, unit)
    return tid


def test_a_worker_whose_heartbeat_is_too_old_is_detected(book):
    now = time.time()
    grace = 300.0
    old = now - 10 * grace  # when the remote workers started
    workers = {
        "stale-hb": f"far-host-a:11:{old:.2f}",  # last heartbeat older than grace
        "fresh-hb": f"far-host-b:12:{old:.2f}",  # recent heartbeat
        "no-hb-old": f"far-host-c:13:{old:.2f}",  # never beat, started long ago
        "no-hb-new": f"far-host-d:14:{now - 5:.2f}",  # never beat yet, just started
        "me": book.worker,
    }
    book.study.set_user_attr(tr.HEARTBEAT + workers["stale-hb"], now - grace - 30)
    book.study.set_user_attr(tr.HEARTBEAT + workers["fresh-hb"], now - 5)
    tids = {unit: running_trial(book, w, unit) for unit, w in workers.items()}
    attrs = book.attrs()
    assert not tr.alive(workers["stale-hb"], attrs, grace)
    assert tr.alive(workers["fresh-hb"], attrs, grace)
    # the same heartbeat judged with a shorter limit is stale
    assert not tr.alive(workers["fresh-hb"], attrs, 1.0)

    failed = book.fail_stale(grace)
    assert sorted(failed) == ["no-hb-old", "stale-hb"]
    states = {unit: book.storage.get_trial(tid).state for unit, tid in tids.items()}
    assert states == {"stale-hb": TrialState.FAIL, "fresh-hb": TrialState.RUNNING,
                      "no-hb-old": TrialState.FAIL, "no-hb-new": TrialState.RUNNING,
                      "me": TrialState.RUNNING}
    note = book.storage.get_trial(tids["stale-hb"]).user_attrs[tr.NOTE]
    assert note == f"stale: worker {workers['stale-hb']} died"
    assert book.fail_stale(grace) == []  # already failed: nothing twice


def test_a_dead_local_worker_is_detected_without_waiting(book):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead = f"{socket.gethostname()}:{proc.pid}:{time.time() - 1:.2f}"
    book.study.set_user_attr(tr.HEARTBEAT + dead, time.time())  # a fresh beat does not help
    tid = running_trial(book, dead, "u")
    assert book.fail_stale(300.0) == ["u"]
    assert book.storage.get_trial(tid).state == TrialState.FAIL


def test_heartbeat_thread_keeps_a_remote_worker_alive_only_while_it_runs(book):
    remote = f"far-host-e:15:{time.time() - 3600:.2f}"
    with tr.Heartbeat(book.study, remote, interval_s=0.05):
        time.sleep(0.3)
        first = book.attrs()[tr.HEARTBEAT + remote]
        time.sleep(0.3)
        second = book.attrs()[tr.HEARTBEAT + remote]
        assert second > first >= time.time() - 1.0  # it beats, repeatedly
        assert tr.alive(remote, book.attrs(), 0.5)
    time.sleep(0.7)  # stopped: the last beat ages past the limit
    assert not tr.alive(remote, book.attrs(), 0.5)
