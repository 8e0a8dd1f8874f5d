"""Each backend's in-engine filtering against its real engine, and filtered eval / sweep runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.testing.filter_conformance import check_filtering
from retrieval.tune.runner import run_eval
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

K = 10
CASES = [
    ("faiss-flat", {}, {}),
    ("hnswlib", {"M": 16, "ef_construction": 100}, {"ef_search": 400}),
    ("faiss-hnsw", {"M": 16, "ef_construction": 100}, {"ef_search": 1000}),
    ("faiss-ivf", {"nlist": 16}, {"nprobe": 16}),
]


@pytest.mark.parametrize(("backend", "build", "search"), CASES, ids=[c[0] for c in CASES])
def test_in_process_engine_filters(backend: str, build: dict, search: dict) -> None:
    recalls = check_filtering(backend, build, search or None)
    assert len(recalls) == 4


@pytest.mark.milvus
def test_milvus_filter_expressions(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")
    recalls = check_filtering("milvus", {"index_type": "HNSW", "M": 16, "efConstruction": 100},
                              {"ef": 2000}, workdir=tmp_path)
    assert len(recalls) == 4


def test_the_check_catches_a_filter_the_engine_ignores() -> None:
    """A backend whose filtered_search ignored the filter would fail the conformance check."""
    from retrieval.engines.faiss.flat import FaissFlatIndex

    original = FaissFlatIndex.filtered_search
    try:
        FaissFlatIndex.filtered_search = lambda self, q, k, flt: self.search(q, k)  # type: ignore[method-assign]
        with pytest.raises(AssertionError, match="id outside"):
            check_filtering("faiss-flat")
    finally:
        FaissFlatIndex.filtered_search = original  # type: ignore[method-assign]


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

    from retrieval.exporting import export_run
    from retrieval.reporting.build import write_report

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


@pytest.mark.parametrize("name", ["filtered-synthetic", "filtered-reuters"])
def test_filtered_sweep_specs_load(name: str) -> None:
    from retrieval.paths import REPO_ROOT
    from retrieval.tune.spec import load_spec

    spec = load_spec(REPO_ROOT / "sweeps" / f"{name}.yaml")
    assert spec.filters is not None and spec.target_recall is not None
    assert set(spec.filters.strategies) == {"engine", "prefilter", "postfilter"}
    backends = {e.backend for e in spec.indexes}
    assert {"faiss-flat", "hnswlib", "faiss-hnsw", "faiss-ivf"} <= backends
    if name == "filtered-synthetic":
        assert "milvus" in backends and spec.filters.selectivities == [0.001, 0.01, 0.1, 0.5, 0.9]
