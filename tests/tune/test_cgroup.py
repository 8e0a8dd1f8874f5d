"""cgroup v1 / v2 detection for the RAM budgets of a cold run (issue 31): named in the output,
and whether rwb can make a group with a memory limit (usable) or falls back to fadvise-window."""

from __future__ import annotations

from pathlib import Path

from retrieval.tune.cgroup import memory_cgroup


def test_v2_v1_and_none_are_told_apart(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/\n")
    got = memory_cgroup(v2, proc)
    assert (got["version"], got["limit_file"], got["parent"]) == (2, "memory.max", str(v2))
    assert got["usable"] is False and "subtree_control" in got["why"]  # memory not delegated
    (v2 / "cgroup.subtree_control").write_text("memory pids\n")
    assert memory_cgroup(v2, proc)["usable"] is True
    (v2 / "cgroup.controllers").write_text("cpu pids\n")  # no memory controller delegated
    assert memory_cgroup(v2)["version"] is None
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (v1 / "memory" / "job" / "a").mkdir(parents=True)
    proc.write_text("4:memory:/job/a\n0::/\n")
    got = memory_cgroup(v1, proc)
    assert (got["version"], got["limit_file"]) == (1, "memory.limit_in_bytes")
    assert got["path"] == str(v1 / "memory") and got["parent"] == str(v1 / "memory/job/a")
    assert got["usable"] is True and got["why"].startswith("cgroup-v1")
    none = memory_cgroup(tmp_path / "empty")
    assert none["version"] is None and none["writable"] is False and not none["usable"]
    assert "fadvise-window" in none["why"]


def test_this_machine_is_described() -> None:
    got = memory_cgroup()
    assert got["version"] in (1, 2, None) and isinstance(got["usable"], bool)
