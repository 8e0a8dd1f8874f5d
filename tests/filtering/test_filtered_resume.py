"""A filtered sweep is the same sweep as any other: its probes are trials of the run's Optuna
study, so a sweep killed with SIGKILL mid-run resumes with the same command and ends with the
same per-bucket choices as a sweep that was never interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from retrieval.tune.trials import NOTE, RECORDED

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

LAUNCH = "import sys, retrieval.testing.fake; from retrieval.cli import main; sys.exit(main())"
#: per unit (build x strategy x bucket): what was chosen, and what it measured (the fake's
#: recall is exact, so every one of these is the same on every run; timings are left out)
SAME = ("label", "backend", "build", "strategy", "bucket", "selectivity", "chosen", "meets",
        "knob", "search", "overfetch", "recall", "recall_lb", "heldout_recall", "heldout_meets",
        "evaluations", "engine_call")
SPEC: dict[str, Any] = {
    "name": "filtered-resume",
    "dataset": {"kind": "synthetic", "n": 2000, "dim": 16, "n_queries": 40, "n_clusters": 8,
                "attributes": True},
    "k": 10, "target_recall": 0.8, "warmup": 2, "batch_repeats": 1,
    # us_per_ef: each post-filter probe of 20 queries busy-waits ~0.1 s (time to kill it)
    "indexes": [{"backend": "fake", "build": {"quality": [1.2, 0.9], "half_ef": 4,
                                               "us_per_ef": 80.0},
                 "search": {"ef_search": 64}}],
    "filters": {"selectivities": [0.05, 0.2, 0.5], "attribute": "uniform",
                "strategies": ["postfilter", "prefilter"], "overfetch_max": 32},
    "tune": {"strategy": "target"},
}


def sweep(spec: Path, out: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-c", LAUNCH, "sweep", str(spec), "--json", "--out", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def trials(out: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=SPEC["name"],
                             storage=f"sqlite:///{out / 'study.db'}").trials


def complete(ts: list[optuna.trial.FrozenTrial]) -> int:
    return sum(t.state == optuna.trial.TrialState.COMPLETE for t in ts)


def choices(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: c.get(k) for k in SAME} for c in summary["choices"]]


@pytest.mark.slow
def test_a_killed_filtered_sweep_resumes_to_the_same_choices(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    reference = sweep(spec, whole)  # never interrupted
    proc = sweep(spec, killed)
    deadline = time.monotonic() + 300
    done = 0
    while time.monotonic() < deadline and proc.poll() is None and done < 8:
        time.sleep(0.2)
        try:
            done = complete(trials(killed))
        except Exception:  # the study is not created yet
            continue
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = {t.number: t for t in trials(killed)}
    kept = {n: (t.params, t.user_attrs) for n, t in before.items()
            if t.state == optuna.trial.TrialState.COMPLETE}
    assert len(kept) >= 8 and not (killed / "summary.json").exists()

    resumed = sweep(spec, killed)  # the same command
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    ref_out, ref_err = reference.communicate(timeout=600)
    assert reference.returncode == 0, ref_err

    after = {t.number: t for t in trials(killed)}
    for n, (params, attrs) in kept.items():  # the finished probes are kept, not measured again
        assert after[n].state == optuna.trial.TrialState.COMPLETE
        assert (after[n].params, after[n].user_attrs) == (params, attrs)
    for n, t in before.items():  # the trial in flight when killed is closed, not lost silently:
        if t.state != optuna.trial.TrialState.RUNNING:  # FAIL, or COMPLETE from its own record
            continue                                     # when the kill landed after recording
        if RECORDED in t.system_attrs:  # its point was written in full before the kill
            assert after[n].state == optuna.trial.TrialState.COMPLETE
            assert after[n].values == [float(t.system_attrs[RECORDED])]
            assert "completed with its own measurement" in after[n].user_attrs[NOTE]
        else:
            assert after[n].state == optuna.trial.TrialState.FAIL
            assert "died" in after[n].user_attrs[NOTE]
    assert complete(list(after.values())) == complete(trials(whole))
    got, want = json.loads(stdout), json.loads(ref_out)
    assert got["workload"] == want["workload"] == "filtered"
    assert choices(got) == choices(want)
    assert len(got["choices"]) == 2 * 2 * 3  # builds x strategies x buckets
    assert sum(c["chosen"] for c in got["choices"]) >= 6
    assert [o["bucket"] for o in got["operating_points"]] == ["sel=0.05", "sel=0.2", "sel=0.5"]
