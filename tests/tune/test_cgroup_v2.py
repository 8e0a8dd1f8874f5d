"""cgroup v2 for the RAM budgets of a cold run (issue 31, item 3). This machine class has cgroup
v1, so the v2 code path is covered here by its path and limit arithmetic on a fake hierarchy
(the files the kernel would show), and the real v2 run is a skip with its reason wherever the
machine has no usable v2 hierarchy (never a pass)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.tune.cgroup import (
    HEADROOM_BYTES,
    MemoryGroup,
    group_limit,
    memory_cgroup,
    serve_in_group,
)

INFO = memory_cgroup()


def test_a_nested_v2_group_is_the_parent_and_its_files_are_v2s(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    own = root / "user.slice" / "rwb.scope"
    own.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (own / "cgroup.subtree_control").write_text("memory\n")
    proc = tmp_path / "self-cgroup"
    proc.write_text("0::/user.slice/rwb.scope\n")
    got = memory_cgroup(root, proc)
    assert (got["version"], got["parent"], got["usable"]) == (2, str(own), True)
    assert got["why"] == f"cgroup-v2: a child group of {own} with memory.max"
    # the group's files: the limit is memory.max, usage memory.current, the counters v2's
    group = MemoryGroup(own / "rwb-cold-1-ab", 2)
    group.path.mkdir()
    assert (group.limit_file, group.procs.name) == ("memory.max", "cgroup.procs")
    (group.path / "memory.current").write_text("123456\n")
    (group.path / "memory.max").write_text("max\n")
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    (group.path / "memory.peak").write_text("200000\n")
    (group.path / "memory.stat").write_text("anon 1\nfile 2\npgmajfault 42\n")
    assert group.usage() == 123456
    limit = group_limit(group.usage(), 0.25, 4_000_000)
    assert limit == 123456 + 1_000_000 + HEADROOM_BYTES
    group.set_limit(limit)
    assert (group.path / "memory.max").read_text() == f"{limit}\n"
    assert group.stats() == {"limit_failures": 7, "oom_kills": 1, "peak_bytes": 200000,
                             "major_faults": 42}
    for name in ("memory.current", "memory.max", "memory.events", "memory.peak", "memory.stat"):
        (group.path / name).unlink()
    group.remove()
    assert not group.path.exists()


def test_v1_files_are_v1s(tmp_path: Path) -> None:
    group = MemoryGroup(tmp_path / "g", 1)
    group.path.mkdir()
    (group.path / "memory.usage_in_bytes").write_text("5000\n")
    (group.path / "memory.failcnt").write_text("3\n")
    (group.path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n"
                                                   "oom_kill 2\n")
    (group.path / "memory.max_usage_in_bytes").write_text("9000\n")
    (group.path / "memory.stat").write_text("pgmajfault 1\ntotal_pgmajfault 11\n")
    assert group.limit_file == "memory.limit_in_bytes" and group.usage() == 5000
    assert group.stats() == {"limit_failures": 3, "oom_kills": 2, "peak_bytes": 9000,
                             "major_faults": 11}


@pytest.mark.skipif(not (INFO["version"] == 2 and INFO["usable"]),
                    reason=f"no usable cgroup v2 hierarchy on this machine ({INFO['why']}); "
                           f"the v2 path is covered by the arithmetic tests above only")
def test_a_real_v2_group_limits_a_child(tmp_path: Path) -> None:
    from retrieval.indexes.registry import create_index, get_backend
    from retrieval.params import validate_params

    rng = np.random.default_rng(0)
    base = rng.normal(size=(20_000, 32)).astype(np.float32)
    idx = create_index("faiss-ivf", 32, "l2", {"nlist": 16}, seed=0)
    idx.build(base)
    snap = tmp_path / "snap"
    snap.mkdir()
    idx.save_cold(snap)  # type: ignore[attr-defined]
    idx.close()
    bp = validate_params(get_backend("faiss-ivf").BuildParams, {"nlist": 16}, where="test")
    job = {"backend": "faiss-ivf", "dim": 32, "metric": "l2", "build": bp, "seed": 0,
           "threads": 1, "snapshot": str(snap), "n": 20_000, "search": {"nprobe": 2}, "k": 10}
    size = sum(f.stat().st_size for f in snap.iterdir() if f.is_file())
    got = serve_in_group(INFO, job, rng.normal(size=(20, 32)).astype(np.float32), 1.0, size,
                         tmp_path / "child")
    assert got["method"] == "cgroup-v2" and got["child_cgroup"].startswith("0::")
    assert got["served"] and got["limit_bytes"] == group_limit(got["base_bytes"], 1.0, size)
    assert not Path(got["group"]).exists()
