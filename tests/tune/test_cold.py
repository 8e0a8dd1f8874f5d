"""Cold runs (issue 31): the page drop is real (a file-backed Faiss index's first queries after
it are slower than its warm queries), the cold/warm profile's definitions, the summary keys."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.indexes.registry import create_index
from retrieval.tune.cold import (
    SupportsColdOpen,
    cold_profile,
    drop_pages,
    queries_to_warm,
    resident_fraction,
    timed_pass,
)
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep


def test_queries_to_warm_is_the_start_of_the_first_warm_window():
    lat = np.array([50.0, 40, 30] + [1.0] * 40)
    assert queries_to_warm(lat, warm_p99=1.0, window=8) == 3
    assert queries_to_warm(np.ones(20), warm_p99=1.0, window=8) == 0
    assert queries_to_warm(np.full(20, 5.0), warm_p99=1.0, window=8) is None
    prof = cold_profile(np.array([9.0, 8, 1, 1]), np.array([1.0, 1, 1, 1]), window=2)
    assert prof["cold_p99_ms"] == pytest.approx(np.percentile([9.0, 8.0], 99))
    assert prof["warm_p99_ms"] == 1.0 and prof["queries_to_warm"] == 2
    assert prof["p99_curve"][0] == [0, pytest.approx(np.percentile([9.0, 8.0], 99))]
    assert [i for i, _ in prof["p99_curve"]] == list(range(7))  # 8 queries, windows of 2


def test_a_cold_file_backed_index_is_slower_first_than_warm(tmp_path):
    """Faiss IVF-Flat (51 MB, read with IO_FLAG_MMAP): after posix_fadvise(DONTNEED) its pages
    are out of the page cache (mincore), the first queries read them from disk; the slowest of
    the first three queries is slower than the median warm query."""
    rng = np.random.default_rng(0)
    n, d = 100_000, 128
    base = rng.normal(size=(n, d)).astype(np.float32)
    queries = rng.normal(size=(60, d)).astype(np.float32)
    idx = create_index("faiss-ivf", d, "l2", {"nlist": 64}, seed=0)
    idx.build(base)
    snap = tmp_path / "snap"
    snap.mkdir()
    idx.save_snapshot(snap)  # type: ignore[attr-defined]
    idx.close()
    cold_idx = create_index("faiss-ivf", d, "l2", {"nlist": 64}, seed=0)
    assert isinstance(cold_idx, SupportsColdOpen)
    try:
        files = cold_idx.open_cold(snap, n)
        cold_idx.set_search_params(nprobe=16)
        try:
            method = drop_pages(files)
        except Exception as exc:  # NotReachable: no way to drop pages on this machine
            pytest.skip(f"page cache cannot be dropped here: {exc}")
        before = resident_fraction(files)
        if before is None or before > 0.2:
            pytest.skip(f"the drop did not take on this filesystem ({method}: {before} of the "
                        f"pages still resident)")
        cold, _ = timed_pass(cold_idx, queries[:3], 10)
        after = resident_fraction(files)
        timed_pass(cold_idx, queries, 10)  # every list touched at least once more
        warm, _ = timed_pass(cold_idx, queries, 10)
    finally:
        cold_idx.close()
    assert after is not None and after > before  # the queries paged the file in (mmap served)
    assert cold.max() > np.median(warm), (cold, np.median(warm))


def cold_spec(**extra):
    return parse_spec({
        "name": "cold", "dataset": "synthetic-small", "k": 10, "warmup": 0,
        "index_build": {"threads": 1, "cache": False}, "cold": True,
        "indexes": [{"backend": "faiss-ivf", "build": {"nlist": 16}, "search": {"nprobe": 2}}],
        **extra}, source="cold.yaml")


def test_cold_run_summary_keys(tmp_path):
    rng = np.random.default_rng(1)
    ds = VectorDataset.from_arrays(rng.normal(size=(2000, 16)).astype(np.float32),
                                   rng.normal(size=(80, 16)).astype(np.float32), "l2",
                                   name="cold-gauss")
    s = run_sweep(cold_spec(target_recall=0.8), tmp_path / "run", dataset=ds).summary
    assert s["workload"] == "cold"
    (row,) = s["cold"]
    for key in ("cold_p99_ms", "warm_p99_ms", "queries_to_warm", "drop_method"):
        assert key in row
    assert row["drop_method"].startswith(("posix_fadvise", "/proc/sys/vm/drop_caches"))
    assert row["recall_lower"] >= 0.8  # the target search chose the knob
    assert [b["budget"] for b in row["budgets"]] == [0.25, 0.5, 1.0]
    method = s["cold_info"]["budget_method"]
    used = {b["method"] for b in row["budgets"]}
    assert used == {"fadvise-window"} or used == {f"cgroup-v{s['cold_info']['cgroup']['version']}"}
    assert s["cold_info"]["method"] in used and method.startswith(used.pop())
    assert 0 < (row["warm_resident_bytes"] or 1) <= row["index_file_bytes"] + 4096
    base = {"fadvise-window": "index_file_bytes"}.get(method.split(":")[0],
                                                      "warm_resident_bytes")
    assert {b["budget_of"] for b in row["budgets"]} == {base}


def test_cold_refuses_a_backend_without_files():
    with pytest.raises(ConfigError) as e:
        run_sweep(parse_spec({
            "name": "cold", "dataset": "synthetic-small", "k": 10, "cold": True,
            "indexes": [{"backend": "hnswlib", "build": {"M": 8}, "search": {"ef_search": 10}}]},
            source="cold.yaml"))
    assert "indexes[0].backend" in str(e.value) and "hnswlib" in str(e.value)


def test_cli_prints_the_cold_table_and_report_draws_the_curve(tmp_path, capsys):
    from retrieval.cli import main

    path = tmp_path / "cold.yaml"
    path.write_text("name: cold\ndataset: synthetic-small\nk: 10\n"  # no target: no budgets
                    "warmup: 0\ncold: true\nindex_build: {cache: false}\nindexes:\n"
                    "  - backend: faiss-ivf\n    build: {nlist: 16}\n    search: {nprobe: 1}\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "run"), "--json"]) == 0
    import json

    s = json.loads(capsys.readouterr().out)
    assert {"cold_p99_ms", "warm_p99_ms", "queries_to_warm"} <= set(s["cold"][0])
    assert main(["report", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "report_cold.png").is_file()


def test_cold_run_keeps_no_index_copy_in_the_run(tmp_path):
    rng = np.random.default_rng(2)
    ds = VectorDataset.from_arrays(rng.normal(size=(800, 8)).astype(np.float32),
                                   rng.normal(size=(40, 8)).astype(np.float32), "l2",
                                   name="cold-small")
    res = run_sweep(cold_spec(), tmp_path / "run", dataset=ds)
    assert not (res.run.path / "cold-index").exists()
    assert "budgets" not in res.summary["cold"][0]  # no target: no budgets, the grid's config
    assert res.summary["cold"][0]["search"] == {"nprobe": 2}
