"""Filtered search on the real labelled set: Reuters-21578 paragraphs with their article's TOPICS
and PLACES (MiniLM vectors, embedded once and cached; slow the first time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.loaders.attributes import reuters_attributes
from retrieval.paths import data_dir
from retrieval.reporting.build import write_report
from retrieval.tune.runner import load_vectors, run_eval
from retrieval.tune.spec import load_spec, parse_spec, resolved

FOLDER = data_dir() / "reuters21578"
pytestmark = pytest.mark.skipif(not FOLDER.is_dir(), reason=f"no Reuters-21578 at {FOLDER}")
SPEC = Path(__file__).resolve().parents[2] / "sweeps" / "filtered-reuters.yaml"


def test_reuters_labels_from_the_sgml() -> None:
    a = reuters_attributes(FOLDER, ["1-0", "1-3", "2-0"], ["topics", "places"])
    assert [a.labels["topics"].row(i) for i in range(3)] == [["cocoa"], ["cocoa"], []]
    assert a.labels["places"].row(0) == ["el-salvador", "usa", "uruguay"]
    assert a.labels["places"].row(2) == ["usa"]


@pytest.mark.slow
@pytest.mark.model
def test_filtered_eval_on_reuters_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the packaged manifest (20,000 paragraphs + 300 queries) cut to 2,000 + the 60 queries used
    # below, so that a fresh machine (nothing else embeds these paragraphs) embeds it in about
    # half a minute; same collection, labels and seed, and every label bucket still holds
    # dozens of paragraphs (the checks below are on label frequencies and exact recall)
    manifest = (SPEC.parents[1] / "datasets" / "reuters-labelled.yaml").read_text()
    assert "n_base: 20000" in manifest and "n_queries: 300" in manifest
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "reuters-labelled.yaml").write_text(
        manifest.replace("n_base: 20000", "n_base: 2000").replace("n_queries: 300",
                                                                  "n_queries: 60"))
    monkeypatch.setenv("RWB_DATASETS_DIR", str(tmp_path / "ds"))
    spec = load_spec(SPEC)
    ds = load_vectors(spec)
    assert ds.n_base == 2000 and ds.n_queries == 60
    assert ds.attributes is not None and {"topics", "places"} <= set(ds.attributes.names)
    freq = ds.attributes.labels["topics"].frequencies()
    assert 0.05 < freq["earn"] < 0.2  # the largest topics are a few percent to ~15%
    small = ds.subset_queries(np.arange(60), "60")
    data = resolved(spec)
    data.update(indexes=[{"backend": "faiss-flat"},
                         {"backend": "hnswlib", "build": {"M": 16, "ef_construction": 100},
                          "search": {"ef_search": 64}}],
                filters={**data["filters"], "selectivities": [0.01],
                         "strategies": ["engine", "prefilter"]}, warmup=2, batch_repeats=1)
    res = run_eval(parse_spec(data), tmp_path / "run", dataset=small)
    rows = res.summary["rows"]
    assert {r["bucket"] for r in rows} == {"topic-earn", "topic-grain-or-wheat", "place-usa",
                                           "place-japan", "sel=0.01"}
    assert all(r["recall"] == 1.0 for r in rows if r["label"] == "faiss-flat")
    usa = next(r for r in rows if r["bucket"] == "place-usa")
    assert 0.4 < usa["selectivity"] < 0.7
    rep = write_report(tmp_path / "run")
    assert {p.name for p in rep.pngs} == {"report_recall_vs_selectivity.png",
                                          "report_p95_vs_selectivity.png"}
