"""cgroup v1 / v2 detection for the RAM budgets of a cold run (issue 31): named in the output,
never applied."""

from __future__ import annotations

from pathlib import Path

from retrieval.tune.cgroup import memory_cgroup


def test_v2_v1_and_none_are_told_apart(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    got = memory_cgroup(v2)
    assert (got["version"], got["limit_file"], got["used"]) == (2, "memory.max", False)
    (v2 / "cgroup.controllers").write_text("cpu pids\n")  # no memory controller delegated
    assert memory_cgroup(v2)["version"] is None
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    got = memory_cgroup(v1)
    assert (got["version"], got["limit_file"]) == (1, "memory.limit_in_bytes")
    assert got["path"] == str(v1 / "memory") and "fadvise-window" in got["why"]
    none = memory_cgroup(tmp_path / "empty")
    assert none["version"] is None and none["writable"] is False


def test_this_machine_is_described() -> None:
    got = memory_cgroup()
    assert got["version"] in (1, 2, None) and got["used"] is False
