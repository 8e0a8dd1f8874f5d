"""The administrative API (retrieval.api.admin) the CLI calls for `rwb backends`, `rwb datasets`,
`rwb pareto` and `rwb services`, and the engine descriptor hooks it reads (no server here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import retrieval.api as api
from retrieval.cli import main
from retrieval.errors import ConfigError
from retrieval.indexes.engine import all_engines, leftover_hooks, services
from retrieval.runs import RunDir, thread_info

ROWS = [
    {"backend": "fake", "build": {}, "search": {"ef_search": 8}, "recall": 0.80, "p95_ms": 0.1,
     "qps": 9000},
    {"backend": "fake", "build": {}, "search": {"ef_search": 16}, "recall": 0.90, "p95_ms": 0.2,
     "qps": 5000},
    {"backend": "fake", "build": {}, "search": {"ef_search": 4}, "recall": 0.70, "p95_ms": 0.5,
     "qps": 1000},  # dominated on both fronts
]


def test_the_api_lists_backends_as_the_cli_prints_them(capsys) -> None:
    status = {s.name: s for s in api.list_backends()}
    assert status["faiss-flat"].available and status["faiss-flat"].version
    assert main(["backends", "--json"]) == 0
    printed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(printed) == set(status)
    assert printed["faiss-flat"]["version"] == status["faiss-flat"].version


def test_the_api_lists_datasets_as_the_cli_prints_them(capsys) -> None:
    entries = api.list_datasets()
    assert entries and all(e.name and e.kind for e in entries)
    assert main(["datasets", "--json"]) == 0
    assert [d["name"] for d in json.loads(capsys.readouterr().out)] == [e.name for e in entries]


def _run(tmp_path: Path, summary: dict) -> Path:
    run = RunDir.create(tmp_path / "run", "t")
    run.write_json("summary.json", summary)
    return run.path


def test_pareto_front_of_an_eval_run_and_the_cli(tmp_path: Path, capsys) -> None:
    path = _run(tmp_path, {"run_id": "r1", "k": 10, "rows": ROWS})
    front = api.pareto_front(path)
    assert front.run_id == "r1" and front.k == 10 and front.target_recall is None
    assert [p["search"]["ef_search"] for p in front.points] == [8, 16]
    assert main(["pareto", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == list(front.points)


def test_pareto_front_takes_a_sweeps_stored_front(tmp_path: Path) -> None:
    stored = [{**ROWS[2], "fronts": ["p95_ms"]}]
    path = _run(tmp_path, {"run_id": "s", "k": 5, "target_recall": 0.9, "pareto": stored,
                           "rows": ROWS})
    front = api.pareto_front(path)
    assert list(front.points) == stored and front.target_recall == 0.9


def test_pareto_refuses_a_filtered_run_in_one_line(tmp_path: Path, capsys) -> None:
    path = _run(tmp_path, {"workload": "filtered", "rows": ROWS})
    with pytest.raises(ConfigError, match="one trade-off per selectivity bucket"):
        api.pareto_front(path)
    assert main(["pareto", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_cleanup_without_a_server_names_the_engines_variables(monkeypatch) -> None:
    for hook in leftover_hooks().values():
        monkeypatch.delenv(hook.env, raising=False)
    with pytest.raises(ConfigError) as err:
        api.services_cleanup()
    assert str(err.value) == ("services cleanup: no server to look at: set RWB_PG_URL and/or "
                              "REDIS_URL (or pass --pg-url / --redis-url)")
    with pytest.raises(ConfigError, match="unknown server variable 'MY_URL'"):
        api.services_cleanup(urls={"MY_URL": "redis://x"})
    assert api.cleanup_options() == {"--pg-url": "RWB_PG_URL", "--redis-url": "REDIS_URL"}


def test_engines_declare_their_services_and_leftovers() -> None:
    assert set(services()) == {"milvus", "pgvector", "redis"} == set(api.service_names())
    assert {s.module for s in services().values()} == {"milvus_server", "pg_server",
                                                       "redis_server"}
    assert {h.label for h in leftover_hooks().values()} == {"PostgreSQL", "Redis"}
    with_cases = {n for n, d in all_engines().items() if d.conformance}
    assert {"faiss", "hnswlib", "lancedb"} <= with_cases


def test_conformance_cases_come_from_the_descriptors() -> None:
    from retrieval.testing.conformance import engine_cases

    cases = engine_cases()
    assert [c.id for c in cases["faiss-ivf"]] == [
        "faiss-ivf-flat-l2", "faiss-ivf-sq8-l2", "faiss-ivf-sq8-refine-ip",
        "faiss-ivf-pq-refine-cosine"]
    assert [c.metric for c in cases["hnswlib"]] == ["l2", "ip", "cosine"]
    assert all(c.min_recall == 0.95 and not c.exact_distances for c in cases["lancedb-hnsw"])


def test_thread_settings_come_from_the_engines() -> None:
    import hnswlib  # noqa: F401  (in use: its setting is recorded)

    threads = thread_info(3)
    assert threads["spec_threads"] == 3 and threads["hnswlib_num_threads"] == 3
    assert threads["faiss_omp_max_threads"] >= 1
    assert "hnswlib_num_threads" not in thread_info()  # no spec threads: nothing to record


def test_trained_parts_are_keyed_by_their_library_version() -> None:
    from retrieval.indexes.buildcache import TrainedStore

    store = TrainedStore(None, "data")
    key = {"kind": "coarse quantizer", "library_version": "1.0", "nlist": 4}
    store.put(key, np.ones((4, 2), dtype=np.float32))
    assert store.get(key) is not None and store.trained == 1 and store.shared == 1
    assert store.get({**key, "library_version": "2.0"}) is None  # another library: retrained
