"""The rerank router under the adaptive judgement (retrieval.rerank.adaptive): cost in
candidates scored, quality per query (nDCG@10 here), compared with the cheapest fixed rerank
depth at the same mean and p5 on the same held-out queries."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.rerank.adaptive import COST_UNIT, router_vs_fixed_depth
from retrieval.rerank.route import RouteInputs


def _case(easy_share: float) -> tuple[RouteInputs, list[dict], np.ndarray]:
    """40 queries: 'easy' ones (high dense top-1) gain nothing from a rerank, hard ones need
    depth 20; BM25 answers the easy ones as well as the dense stage does."""
    rng = np.random.default_rng(0)
    n = 40
    easy = np.arange(n) < int(easy_share * n)
    qids = tuple(f"q{i}" for i in range(n))
    base = np.where(easy, 0.9, 0.3)
    depth_q = {0: base, 10: np.where(easy, 0.9, 0.6), 20: np.where(easy, 0.9, 0.8),
               50: np.where(easy, 0.9, 0.82)}
    rows = [{"depth": d, "query_id": q, "ndcg@10": float(v[i])}
            for d, v in depth_q.items() for i, q in enumerate(qids)]
    inputs = RouteInputs(qids, np.where(easy, 0.8, 0.2) + rng.random(n) * 0.01,
                         depth_q[20], np.where(easy, 0.9, 0.1), np.full(n, 5.0),
                         np.full(n, 1.0))
    return inputs, rows, easy


def test_the_router_costs_what_its_routes_say_and_beats_a_deeper_fixed_depth() -> None:
    inputs, rows, easy = _case(0.75)
    e = router_vs_fixed_depth(inputs, easy, 20, "ndcg@10", rows, "dense",
                              {d: {"p50_ms": float(d)} for d in (0, 10, 20, 50)})
    q = np.where(easy, 0.9, 0.8)
    assert e["cost_unit"] == COST_UNIT == "candidates scored by the reranker"
    assert e["cost"] == pytest.approx(20 * (~easy).mean())  # 5.0: only hard queries rerank
    assert (e["mean"], e["p5"]) == (pytest.approx(q.mean()), pytest.approx(np.percentile(q, 5)))
    vs = e["vs_fixed"]
    assert vs["knob"] == "rerank_depth" and vs["value"] == 20 and vs["cost"] == 20.0
    assert vs["winner"] == "policy" and vs["ratio"] == pytest.approx(0.25)
    assert vs["p50_ms"] == 20.0


def test_when_no_query_is_routed_the_fixed_depth_wins_the_tie() -> None:
    inputs, rows, _ = _case(0.75)
    e = router_vs_fixed_depth(inputs, np.zeros(40, dtype=bool), 20, "ndcg@10", rows, "dense", {})
    assert e["vs_fixed"]["winner"] == "fixed"
    assert e["vs_fixed"]["verdict"].startswith("the tuned fixed setting wins")


def test_a_sweep_on_another_first_stage_is_skipped_with_its_reason() -> None:
    inputs, rows, easy = _case(0.5)
    e = router_vs_fixed_depth(inputs, easy, 20, "ndcg@10", rows, "bm25", {})
    assert "reranks the bm25 first stage" in e["skipped"]
