"""``tune.query_subset``: the knob search on a recall-stratified subset of the tuning queries,
the chosen knob re-measured on every tuning query, the saving and any change of answer
reported in the summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("faiss")

from retrieval.tune.spec import parse_spec
from retrieval.tune.subset import MIN_QUERIES, stratified_subset
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


def test_subset_keeps_the_recall_distribution() -> None:
    rng = np.random.default_rng(0)
    recall = rng.choice([0.3, 0.6, 0.9, 1.0], size=1000, p=[0.1, 0.2, 0.3, 0.4])
    tune = np.arange(1000, 2000)
    sub = stratified_subset(tune, recall, 0.2, seed=1)
    assert sub.size == 200 and np.all(np.diff(sub) > 0) and set(sub) <= set(tune)
    picked = recall[sub - 1000]
    for v in (0.3, 0.6, 0.9, 1.0):  # every stratum keeps its share (to one query in 200)
        assert abs(float(np.mean(picked == v)) - float(np.mean(recall == v))) <= 0.0051
    assert abs(float(picked.mean()) - float(recall.mean())) <= 0.005
    # never below MIN_QUERIES (or every query when there are fewer)
    assert stratified_subset(tune[:80], recall[:80], 0.1, seed=1).size == MIN_QUERIES
    assert stratified_subset(tune[:30], recall[:30], 0.1, seed=1).size == 30


def _spec(share: float) -> dict[str, Any]:
    return {
        "name": f"subset-{share}", "dataset": "synthetic-small", "k": 10, "seed": 0,
        "threads": 1, "target_recall": 0.9,
        "indexes": [{"backend": "faiss-hnsw", "build": {"M": 8, "ef_construction": 40},
                     "search": {"ef_search": [10]}}],
        "tune": {"query_subset": share, "heldout_fraction": 0.2,
                 "search_range": {"ef_search": [10, 200]}},
        "index_build": {"cache": False, "threads": 1},
    }


def test_subset_search_reports_saving_and_checks_on_every_query(tmp_path: Path) -> None:
    full = run_sweep(parse_spec(_spec(1.0), source="a.yaml"), tmp_path / "a").summary
    sub = run_sweep(parse_spec(_spec(0.25), source="b.yaml"), tmp_path / "b").summary
    assert "query_subset" not in full
    q = sub["query_subset"]
    assert q["share"] == 0.25 and q["units"] == 1
    (b,) = sub["builds"]
    note = b["note"]["query_subset"]
    n_tune = sub["queries"]["tuning"]
    assert note["of"] == n_tune and note["queries"] < n_tune
    assert q["query_evals"] < q["query_evals_all"] and 0 < q["saved"] < 1
    # the chosen point was measured on every tuning query and meets there
    assert b["chosen"]["n_queries"] == n_tune and b["chosen"]["meets"]
    # the steps after the first ran on the subset (rows say how many queries each saw)
    sizes = sorted({r["n_queries"] for r in sub["rows"]})
    assert note["queries"] in sizes and n_tune in sizes
    # whether the answer changed is reported, and agrees with the run on every query
    (f,) = full["builds"]
    same = f["chosen"]["search"] == b["chosen"]["search"]
    assert note["answer_changed"] is (not same) or note["knob"] != note["knob_on_subset"]
    assert q["answers_changed"] == int(note["answer_changed"])
