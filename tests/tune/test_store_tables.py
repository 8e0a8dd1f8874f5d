"""Parquet outputs: integer params stay integers where other rows lack them, every table has a
run_id, and measurements.parquet / per_query.parquet store a config the same way."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from retrieval.runs import RunDir, typed_frame
from retrieval.tune.runner import run_eval
from retrieval.tune.spec import parse_spec


def test_typed_frame_keeps_ints_and_bools_where_values_are_missing():
    f = typed_frame([{"M": 8, "ok": True, "x": 0.5, "n": 3},
                     {"M": None, "ok": None, "x": None, "n": 4},
                     {"M": np.int64(16), "ok": False, "x": 1.0, "n": 5}])
    assert str(f["M"].dtype) == "Int64" and f["M"].tolist()[::2] == [8, 16]
    assert f["M"].isna().tolist() == [False, True, False]
    assert str(f["ok"].dtype) == "boolean"
    assert f["x"].dtype == np.float64 and f["n"].dtype == np.int64


def test_write_table_adds_run_id_and_reads_back_ints(tmp_path):
    run = RunDir.create(tmp_path / "r", "t")
    run.write_table("t.parquet", [{"build": {"M": 8}}, {"build": {"nlist": 4}}])
    back = pd.read_parquet(tmp_path / "r" / "t.parquet")
    assert back["run_id"].tolist() == [run.run_id] * 2
    assert str(back["build.M"].dtype) == "Int64" and back["build.M"][0] == 8
    assert str(back["build.nlist"].dtype) == "Int64" and back["build.nlist"][1] == 4


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory):
    spec = parse_spec({
        "name": "tables", "dataset": "synthetic-small", "k": 10, "warmup": 2,
        "batch_repeats": 1,
        "indexes": [
            {"backend": "faiss-flat"},
            {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 20},
             "search": {"ef_search": [10, 40]}},
            {"backend": "faiss-ivf", "build": {"nlist": 8}, "search": {"nprobe": [1, 4]}},
        ],
    }, source="tables.yaml")
    return run_eval(spec, tmp_path_factory.mktemp("tables") / "run")


def test_measurements_and_per_query_store_configs_alike(eval_run):
    path = eval_run.run.path
    meas = pd.read_parquet(path / "measurements.parquet")
    pq = pd.read_parquet(path / "per_query.parquet")
    for table in (meas, pq):
        assert set(table["run_id"]) == {eval_run.run.run_id}
        for col in ("build.M", "build.ef_construction", "search.ef_search", "build.nlist",
                    "search.nprobe"):
            assert str(table[col].dtype) == "Int64", (col, table[col].dtype)
        flat = table[table.backend == "faiss-flat"]
        assert flat["build.M"].isna().all() and not flat.empty
        hn = table[table.backend == "hnswlib"]
        assert sorted(set(hn["search.ef_search"].tolist())) == [10, 40]
        # the JSON columns say the same as the typed ones
        for _, row in hn.iterrows():
            assert json.loads(row["search"]) == {"ef_search": int(row["search.ef_search"])}
            assert json.loads(row["build"])["M"] == int(row["build.M"])
    # one key (backend, build, search) joins the two files: per-query mean = measured recall
    batch = meas[meas["mode"] == "batch"]
    means = pq.groupby(["backend", "build", "search"])["recall"].mean()
    assert len(means) == len(batch) == 5
    for _, row in batch.iterrows():
        assert means[(row["backend"], row["build"], row["search"])] == pytest.approx(
            row["recall"])


def test_manifest_records_the_threads_in_force(tmp_path, monkeypatch):
    import faiss

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)  # not what the spec asks: the run must record its own
    spec = parse_spec({
        "name": "threads", "dataset": "synthetic-small", "k": 10, "warmup": 2,
        "batch_repeats": 1, "threads": 1,
        "indexes": [{"backend": "faiss-flat"},
                    {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 20},
                     "search": {"ef_search": 10}}],
    }, source="threads.yaml")
    try:
        result = run_eval(spec, tmp_path / "run")
    finally:
        faiss.omp_set_num_threads(before)
    threads = json.loads((tmp_path / "run" / "manifest.json").read_text())["threads"]
    assert threads["spec_threads"] == 1
    assert threads["faiss_omp_max_threads"] == 1  # set by the backend during the run
    assert threads["hnswlib_num_threads"] == 1
    assert threads["OPENBLAS_NUM_THREADS"] == "1"
    assert threads["cpus_allowed"] >= 1
    assert result.summary["rows"][0]["threads"] == 1


def test_write_frame_adds_run_id_too(tmp_path):
    """Tables written as frames (e.g. the cache run's probes.parquet) carry run_id as well."""
    run = RunDir.create(tmp_path / "r", "t")
    run.write_frame("p.parquet", pd.DataFrame({"split": ["tune", "heldout"], "d": [0.1, 0.2]}))
    back = pd.read_parquet(tmp_path / "r" / "p.parquet")
    assert back.columns[0] == "run_id" and back["run_id"].tolist() == [run.run_id] * 2
    assert back["split"].tolist() == ["tune", "heldout"]
