"""Each backend's in-engine filtering against its real engine, and filtered eval / sweep runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.filtering import FilterSpec, Where, bind, bind_workload, filtered_ground_truth
from retrieval.filtering.gt import filtered_recall
from retrieval.indexes import create_index
from retrieval.indexes.base import SupportsFilter
from retrieval.loaders.synthetic import make_synthetic
from retrieval.tune.runner import run_eval
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

K = 10
DS = make_synthetic(2000, 16, 30, n_clusters=8, attributes=True, seed=5)
CASES = [
    ("faiss-flat", {}, {}),
    ("hnswlib", {"M": 16, "ef_construction": 100}, {"ef_search": 400}),
    ("faiss-hnsw", {"M": 16, "ef_construction": 100}, {"ef_search": 1000}),
    ("faiss-ivf", {"nlist": 16}, {"nprobe": 16}),
]


def _check(index: object, build_s: object) -> None:
    assert DS.attributes is not None
    assert isinstance(index, SupportsFilter)
    for where in (Where(attr="uniform", range=(0, 50_000)), Where(attr="tag", eq="t2")):
        rf = bind(where, DS.attributes, label="t")
        bucket = bind_workload(FilterSpec(fixed=[{"name": "f", "where": where}]),
                               DS.attributes, DS.n_queries)[0]
        gt = filtered_ground_truth(DS.base, DS.queries, DS.metric, bucket, K)
        res = index.filtered_search(DS.queries, K, rf)
        found = res.ids[res.ids >= 0]
        assert rf.mask[found].all(), "an id outside the filter came back"
        rec = filtered_recall(res.ids, gt, K)
        assert rec.mean() >= 0.9, (where.describe(), rec.mean())


@pytest.mark.parametrize(("backend", "build", "search"), CASES, ids=[c[0] for c in CASES])
def test_in_process_engine_filters(backend: str, build: dict, search: dict) -> None:
    index = create_index(backend, DS.dim, DS.metric, build)
    info = index.build(DS.base)
    if search:
        index.set_search_params(**search)
    _check(index, info)
    index.close()


@pytest.mark.milvus
def test_milvus_filter_expressions(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")
    assert DS.attributes is not None
    index = create_index("milvus", DS.dim, DS.metric,
                         {"index_type": "HNSW", "M": 16, "efConstruction": 100},
                         workdir=tmp_path)
    try:
        index.attach_attributes(DS.attributes)
        index.build(DS.base)
        index.set_search_params(ef=1000)
        _check(index, None)
    finally:
        index.close()


SPEC = {
    "name": "filtered-tiny",
    "dataset": {"kind": "synthetic", "n": 2000, "dim": 16, "n_queries": 40, "n_clusters": 8,
                "attributes": True},
    "k": K, "target_recall": 0.9, "warmup": 2, "batch_repeats": 1,
    "indexes": [{"backend": "faiss-flat"},
                {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 64},
                 "search": {"ef_search": [10, 200]}}],
    "filters": {"selectivities": [0.01, 0.1, 0.5], "attribute": "clustered",
                "strategies": ["engine", "prefilter", "postfilter"], "overfetch_max": 16},
}


def test_filtered_eval_rows_and_cliff(tmp_path: Path) -> None:
    res = run_eval(parse_spec(SPEC), tmp_path / "eval")
    s = res.summary
    flat = [r for r in s["rows"] if r["label"] == "faiss-flat" and r["strategy"] == "engine"]
    assert {r["bucket"] for r in flat} == {"sel=0.01", "sel=0.1", "sel=0.5"}
    assert all(r["recall"] == 1.0 for r in flat)
    assert all("filter" in r and 0 < r["selectivity"] < 1 for r in s["rows"])
    assert set(s["cliff_selectivity"]) == {"faiss-flat", "hnswlib"}
    assert s["cliff_by_strategy"]["faiss-flat"]["engine"] is None
    assert (tmp_path / "eval" / "measurements.parquet").exists()


def test_filtered_target_sweep_operating_points(tmp_path: Path) -> None:
    spec = parse_spec({**SPEC, "tune": {"strategy": "target"}})
    s = run_sweep(spec, tmp_path / "sweep").summary
    ops = s["operating_points"]
    assert [o["bucket"] for o in ops] == ["sel=0.01", "sel=0.1", "sel=0.5"]
    assert all(o["strategy"] is not None and o["p95_ms"] > 0 for o in ops)
    hn = [c for c in s["choices"] if c["label"] == "hnswlib" and c["strategy"] == "engine"]
    assert all(c["knob_name"] == "ef_search" and c["chosen"] for c in hn)
    assert all(c["recall_lb"] >= 0.9 for c in hn)
    assert np.isfinite([o["p95_ms"] for o in ops]).all()
    assert "cliff_selectivity" in s and all("filter" in r for r in s["rows"])


def test_filtered_report_and_export(tmp_path: Path) -> None:
    import yaml

    from retrieval.export import export_run
    from retrieval.report.build import write_report

    spec = parse_spec({**SPEC, "tune": {"strategy": "target"},
                       "filters": {**SPEC["filters"], "strategies": ["engine", "prefilter"]}})
    run = run_sweep(spec, tmp_path / "sweep").run
    rep = write_report(run.path)
    assert sorted(p.name for p in rep.pngs) == ["report_p95_vs_selectivity.png",
                                                "report_recall_vs_selectivity.png"]
    assert "Operating points" in rep.html.read_text()
    out = tmp_path / "ops.milvus.yaml"
    export_run(run.path, "milvus", out)
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "ann-filtered" and len(doc["operating_points"]) == 3
    for op in doc["operating_points"]:
        assert op["strategy"] in ("engine", "prefilter")
        if op["strategy"] == "engine" and op["measured_with"]["backend"] == "hnswlib":
            assert op["config"]["index_type"] == "HNSW" and "filter" in op["filter_in_engine"]
