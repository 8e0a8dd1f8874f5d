"""verify compares recorded evidence exactly only when the index is the one it was measured on
(a seeded one-thread build, or that build loaded from the cache); a multi-threaded rebuild gets
the sampling tolerance. Exports record the sweep's build threads."""

from __future__ import annotations

from retrieval.exporting.ann import source
from retrieval.exporting.verify import evidence_checks
from retrieval.tune.results import PointResult


def _point(recall: float) -> PointResult:
    return PointResult(search={"ef_search": 20}, recall=recall, recall_lb=recall - 0.01,
                       recall_tie=recall, recall_p5=0.8, n_queries=250, p50_ms=0.1, p95_ms=0.2,
                       p99_ms=0.3, qps=1e4, build_s=1.0, memory_bytes=None, meets=True)


EVIDENCE = {"recall": 0.960, "recall_lower_bound": 0.950, "measured_on": "hnswlib"}


def test_a_small_drift_fails_on_the_same_index_and_passes_on_a_multithreaded_rebuild():
    now = _point(0.958)  # a 2-thread rebuild moved recall by 0.002
    same = evidence_checks(EVIDENCE, now, None, "hnswlib", 10, 1)
    rebuilt = evidence_checks(EVIDENCE, now, None, "hnswlib", 10, 2)
    assert not all(c["passed"] for c in same)
    assert all(c["passed"] for c in rebuilt)
    assert "2-thread build" in rebuilt[0]["expected"]
    # an edit far beyond sampling noise still fails on a rebuild
    edited = evidence_checks({**EVIDENCE, "recall": 0.9999}, _point(0.90), None, "hnswlib", 10, 2)
    assert "evidence.recall" in [f for c in edited for f in c["fields"]]


def test_export_source_records_the_sweeps_build_threads(monkeypatch):
    from types import SimpleNamespace

    import retrieval.exporting.ann as ann

    b = SimpleNamespace(backend="hnswlib")
    c = SimpleNamespace(build={"M": 8}, build_params={"M": 8, "ef_construction": 200},
                        search={"ef_search": 20})
    s = SimpleNamespace(metric="cosine", k=10)

    monkeypatch.setattr(ann, "_chosen", lambda summary, label: (b, c))
    monkeypatch.setattr(ann, "full_search", lambda backend, search: dict(search))
    with_threads = source(s, {"threads": 1}, "hnswlib", {"builds": {"build_threads": 2}})
    assert with_threads["build_threads"] == 2 and with_threads["threads"] == 1
    assert "build_threads" not in source(s, {"threads": 1}, "hnswlib", {})
