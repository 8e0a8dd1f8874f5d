"""The churn runner consumes the evaluation loop (issue 29): its indexes are built through
``Evaluator.build_on`` (the build log; the controls from the build cache on a second run, the
index that is written to never) and each search step is a point of THE measurer
(``Measurer.at_step``) against the step's exact truth. Small synthetic data: seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.churn.live import ConfigRun
from retrieval.churn.spec import parse_churn_spec, runbook_of
from retrieval.evaluation import Evaluator, StepTruth, per_query_recall
from retrieval.groundtruth.exact import GroundTruth
from retrieval.loaders.catalog import resolve_dataset
from retrieval.workload.runbook import dataset_row_ids, resolve_runbook, truth_at_searches
from tests.helpers import caller_ids, recall_at

pytest.importorskip("hnswlib")
pytest.importorskip("faiss")

DATA = {"kind": "synthetic", "n": 600, "dim": 8, "n_queries": 20, "metric": "l2", "seed": 1}
SPEC = {"name": "loop", "dataset": DATA, "k": 5, "queries": 20, "warmup": 2, "write_batch": 50,
        "confidence": {"method": "binomial"}, "control": "every",
        "configs": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                     "search": {"ef_search": 10}}],
        "runbook": {"steps": [{"insert": {"start": 0, "end": 400}}, {"search": {}},
                              {"delete": {"start": 100, "end": 250}}, {"search": {}}]}}


def _one_run(workdir: Path) -> tuple[ConfigRun, list[dict[str, Any]]]:
    spec = parse_churn_spec(SPEC, source="<test>")
    ds = resolve_dataset(DATA, where="test")
    rb = runbook_of(spec)
    book = resolve_runbook(rb, ds.base, where="test",
                           ids=dataset_row_ids(rb, ds.base_ids, where="test"))
    queries = np.ascontiguousarray(ds.queries[:spec.queries])
    truth = truth_at_searches(book, ds.base, queries, ds.metric, spec.k)
    rows = []
    cr = ConfigRun(spec, spec.configs[0], "hnsw", ds, queries, book, truth, workdir)
    with cr:
        for st in book.steps:
            if st.op == "search":
                found = cr.search(st, control=True)
                live = np.asarray(sorted(cr.live))
                assert np.isin(found.ids[found.ids >= 0], live).all()  # caller ids, all live
                assert found.row["recall"] == pytest.approx(
                    recall_at(found.ids, truth[st.index].ids))
                rows.append(found.row)
            else:
                cr.write(st)
    return cr, rows


def test_churn_builds_through_the_loop_and_measures_each_step_with_the_measurer(
        tmp_path: Path) -> None:
    first, rows = _one_run(tmp_path / "a")
    log = first.ev.build_log
    # the live index, then per search step two controls (the run's seed and the next)
    assert len(log) == 1 + 2 * 2
    assert log[0]["cache"] == "off"  # the index written to never comes from the build cache
    assert {b["cache"] for b in log[1:]} == {"miss"}
    for r in rows:
        assert r["p50_ms"] is not None and r["p99_ms"] >= r["p50_ms"] > 0
        assert 0.0 <= r["recall_lower"] <= r["recall"] <= 1.0
    again, rows2 = _one_run(tmp_path / "b")
    assert again.ev.build_log[0]["cache"] == "off"
    assert {b["cache"] for b in again.ev.build_log[1:]} == {"hit"}  # the same live sets
    assert [r["control_recall"] for r in rows2] == [r["control_recall"] for r in rows]
    assert [r["control_build_s"] for r in rows2] == [r["control_build_s"] for r in rows]


def test_a_step_truth_scores_caller_ids_under_the_fewer_than_k_rule(tmp_path: Path) -> None:
    ds = resolve_dataset(DATA, where="test")
    ev = Evaluator(ds, 5, warmup=0, batch_repeats=1, index_cache=False, eager_truth=False)
    rows = np.arange(3)  # three live vectors, k 5
    ids = caller_ids(ds.n_base)[rows]
    built = ev.build_on("faiss-flat", ev.validate_build("faiss-flat", {}),
                        np.asarray(ds.base[rows]), ids, workdir=None)
    try:
        d = ((ds.queries[:, None, :] - ds.base[rows][None, :, :]) ** 2).sum(axis=2)
        order = np.argsort(d, axis=1)
        exact = np.full((ds.n_queries, 5), -1, dtype=np.int64)
        exact[:, :3] = ids[order]
        dist = np.full((ds.n_queries, 5), np.inf, dtype=np.float32)
        dist[:, :3] = np.take_along_axis(d, order, axis=1)
        where = dict(zip(ids.tolist(), rows.tolist(), strict=True))
        truth = StepTruth(GroundTruth(exact, dist), lambda x: np.vectorize(
            lambda i: where.get(int(i), -1), otypes=[np.int64])(x))
        (m,) = ev.measure(built, {}, modes=["batch"], truth=truth)
    finally:
        built.index.close()
    assert m.ids is not None and set(m.ids[m.ids >= 0].tolist()) <= set(ids.tolist())
    assert m.per_query_recall.tolist() == [1.0] * ds.n_queries  # 3 of 3, not 3 of 5
    assert per_query_recall(m.ids, exact, 5).tolist() == [0.6] * ds.n_queries  # hits / k
    assert ev._gt is None  # the dataset's own truth was never needed
