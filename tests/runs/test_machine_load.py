"""Issue 34 new user 7: the busy-machine rule and its WARNING (a given load, no real one)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from retrieval.runs import provenance
from retrieval.runs.rundir import COMPLETE, FAILED, RunDir


def _load(one_minute: float | None, cpus: int = 2, ticks: list[int] | None = None) -> dict:
    avg = None if one_minute is None else [one_minute, 1.0, 1.0]
    return {"load_average": avg, "cpus": cpus, "steal_fraction": 0.0, "cpu_ticks": ticks}


@pytest.mark.parametrize(("one_minute", "cpus", "expected"), [
    (2.01, 2, True),    # more runnable work than cores
    (2.0, 2, False),    # exactly one runnable task per core: not busy
    (0.3, 2, False),
    (15.9, 16, False),
    (16.5, 16, True),
    (None, 2, False),   # not readable: never called busy
])
def test_busy_means_load_average_above_the_cores(one_minute, cpus, expected) -> None:
    assert provenance.busy(_load(one_minute, cpus)) is expected


def _run_with_load(tmp_path: Path, monkeypatch, start: float, end: float, status: str):
    loads = iter([_load(start), _load(end)])
    monkeypatch.setattr(provenance, "machine_load", lambda: next(loads))
    run = RunDir.create(tmp_path / "r", "t")
    run.write_manifest(kind="eval")
    run.set_status(status)
    return run.read_json("manifest.json")["machine_load"]


def test_a_busy_completed_run_warns_and_flags_the_manifest(tmp_path, monkeypatch, caplog):
    with caplog.at_level(logging.INFO, logger="retrieval.runs.rundir"):
        load = _run_with_load(tmp_path, monkeypatch, start=5.0, end=0.5, status=COMPLETE)
    assert load["busy"] is True
    assert load["start"]["load_average"][0] == 5.0 and load["end"]["load_average"][0] == 0.5
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "busy" in warned[0].getMessage()
    assert "load average 5.0 on 2 CPUs" in warned[0].getMessage()


def test_a_quiet_run_is_not_busy_and_says_nothing(tmp_path, monkeypatch, caplog):
    with caplog.at_level(logging.INFO, logger="retrieval.runs.rundir"):
        load = _run_with_load(tmp_path, monkeypatch, start=2.0, end=1.0, status=COMPLETE)
    assert load["busy"] is False
    assert not [r for r in caplog.records if "busy" in r.getMessage()]


def test_a_failed_run_records_busy_without_the_warning(tmp_path, monkeypatch, caplog):
    """A failed run's one-line error stays one line; the manifest still says busy."""
    with caplog.at_level(logging.INFO, logger="retrieval.runs.rundir"):
        load = _run_with_load(tmp_path, monkeypatch, start=1.0, end=9.0, status=FAILED)
    assert load["busy"] is True
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_steal_during_the_run_is_the_change_of_the_tick_counters(tmp_path,
                                                                     monkeypatch) -> None:
    loads = iter([_load(0.5, ticks=[100, 10_000]), _load(0.5, ticks=[400, 16_000])])
    monkeypatch.setattr(provenance, "machine_load", lambda: next(loads))
    run = RunDir.create(tmp_path / "r", "t")
    run.write_manifest(kind="eval")
    run.set_status(COMPLETE)
    assert run.read_json("manifest.json")["machine_load"]["steal_during_run"] == 0.05
    assert provenance.steal_between({"cpu_ticks": None}, {"cpu_ticks": [1, 2]}) is None
    real = provenance._cpu_ticks()  # this machine: readable here, or None
    assert real is None or real[1] > real[0] >= 0
