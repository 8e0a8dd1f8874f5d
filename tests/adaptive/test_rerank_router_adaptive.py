"""`rwb tune rerank` with the router on the dense first stage: the router's ``adaptive`` entry
(candidates scored, held-out quality) against the tuned fixed rerank depth, re-derived from the
run's own per-query table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import retrieval
from retrieval.rerank.tune import split_queries
from retrieval.testing.rerank_server import overlap_scores
from tests.rerank.test_custom_rerank import _spec, beir  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


@pytest.mark.model
@pytest.mark.slow  # loads the packaged MiniLM for the dense first stage
def test_the_router_is_judged_against_the_fixed_depths(beir: Path,  # noqa: F811
                                                       tmp_path: Path) -> None:
    spec = {**_spec(beir), "first_stage": "dense", "depths": [0, 2, 5]}
    run = retrieval.tune_rerank(spec, reranker=overlap_scores, out=tmp_path / "run")
    s = run.summary
    assert s.adaptive is not None and s.router is not None
    (e,) = s.adaptive
    assert e.policy == "router" and e.cost_unit == "candidates scored by the reranker"
    assert e.cost is not None and 0 <= e.cost <= (s.router.primary_rerank_depth or 0)
    assert e.vs_fixed is not None and e.vs_fixed.knob == "rerank_depth"
    # the fixed side re-derived from per_query.parquet on the held-out queries
    pq = pd.read_parquet(tmp_path / "run" / "per_query.parquet")
    qids = list(pq[pq.depth == 0].query_id)  # the run's query order
    held = split_queries(qids, 0.5, 0)[1]
    assert e.n_queries == len(held)
    metric = s.selection_metric or "ndcg@10"
    ok = []
    for d, rows in pq.groupby("depth"):
        q = rows[rows.query_id.isin(held)][metric].to_numpy()
        if q.mean() >= e.mean - 1e-12 and np.percentile(q, 5) >= e.p5 - 1e-12:
            ok.append(int(d))
    if ok:
        assert e.vs_fixed.value == min(ok) and e.vs_fixed.cost == float(min(ok))
    else:
        assert e.vs_fixed.value is None and e.vs_fixed.winner == "policy"
