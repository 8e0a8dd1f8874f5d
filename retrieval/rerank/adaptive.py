"""The BM25 fallback router put under the adaptive judgement (:mod:`retrieval.adaptive.levels`):
per held-out query, the router either reranks the dense top candidates at its depth or answers
with BM25 (no rerank); it is compared with every fixed rerank depth of the sweep on the same
held-out queries at equal mean AND 5th-percentile quality (the selection metric, e.g.
nDCG@10). Cost unit: candidates scored by the reranker per query; p50 ms beside."""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.adaptive.levels import judge_levels
from retrieval.rerank.route import RouteInputs

COST_UNIT = "candidates scored by the reranker"


def router_vs_fixed_depth(inputs: RouteInputs, mask: np.ndarray, depth: int, metric: str,
                          per_query_rows: list[dict[str, Any]], first_stage: str,
                          depth_ms: dict[int, dict[str, float]]) -> dict[str, Any]:
    """The router on ``inputs`` (held-out queries; ``mask``: True where BM25 answers) vs the
    fixed depths whose per-query quality ``per_query_rows`` holds (depth, query_id, metric)."""
    meta = {"label": "router", "detail": {"primary_rerank_depth": depth,
                                          "routed_share": float(np.mean(mask)),
                                          "quality_metric": metric}}
    if first_stage != "dense":
        return {**meta, "policy": "router", "cost_unit": COST_UNIT,
                "skipped": f"the depth sweep reranks the {first_stage} first stage; the "
                           f"router's primary path is dense + rerank: no fixed depth to "
                           f"compare with"}
    q = np.where(mask, inputs.fallback_quality, inputs.primary_quality)
    cost = np.where(mask, 0.0, float(depth))
    ms = np.where(mask, inputs.fallback_ms, inputs.primary_ms)
    pos = {qid: i for i, qid in enumerate(inputs.query_ids)}
    levels: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for r in per_query_rows:
        i = pos.get(r["query_id"])
        if i is None:
            continue
        d = int(r["depth"])
        if d not in levels:
            levels[d] = (np.full(len(pos), np.nan), np.full(len(pos), float(d)))
        levels[d][0][i] = r[metric]
    levels = {d: v for d, v in levels.items() if not np.isnan(v[0]).any()}
    return judge_levels("router", q, cost, ms, levels, knob="rerank_depth", cost_unit=COST_UNIT,
                        level_ms={d: (depth_ms.get(d) or {}).get("p50_ms") for d in levels},
                        meta=meta)
