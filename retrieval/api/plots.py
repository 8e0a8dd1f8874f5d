"""The figures of the public API (``retrieval.plots``): every plot ``rwb report`` draws, each a
function returning a :class:`matplotlib.figure.Figure` (headless; display it in a notebook).

Index runs (points from :meth:`retrieval.api.results.IndexRun.points` / ``chosen()``):
``recall_vs_latency``, ``recall_vs_qps``, ``recall_vs_knob`` (recall with its lower bound
against the search knob, per index entry), ``per_query_recall``, ``param_surface``,
``build_costs``; ``config_label(point)`` names a config in words for a title. RAG-layer
runs (their summaries, ``run.to_dict()``): ``embed_batch_sweep``,
``fanout_speedups``, ``rerank_depth_curve``, ``cache_curve``. Filtered runs (a spec with
``filters:``; their summaries): ``recall_vs_selectivity``, ``p95_vs_selectivity``. Pipeline
profiles (``retrieval.profile(...).summary``): ``profile_stages`` (stacked per-stage P50 / P95 /
P99 bars, ``summary["stages"]``), ``profile_waterfall`` (``summary["remedies"]``). Churn runs
(``retrieval.bench_churn(...).to_dict()``): ``churn_recall``. Tenants studies (a spec with
``tenants:``; the summary and the run's tenants.parquet): ``tenant_recall``. Topology studies and
cold runs (a spec with ``topology:`` / ``cold: true``; their summaries): ``recall_vs_segments``,
``cold_curve``.
"""

from retrieval.reporting.ann import (
    build_costs,
    param_surface,
    per_query_recall,
    recall_vs_latency,
    recall_vs_qps,
)
from retrieval.reporting.churn import recall_over_steps as churn_recall
from retrieval.reporting.filtered import p95_vs_selectivity, recall_vs_selectivity
from retrieval.reporting.knob import recall_vs_knob
from retrieval.reporting.live import recall_by_knob as live_recall
from retrieval.reporting.points import config_label
from retrieval.reporting.profile import stages_figure as profile_stages
from retrieval.reporting.profile import waterfall_figure as profile_waterfall
from retrieval.reporting.rag import (
    cache_curve,
    embed_batch_sweep,
    fanout_speedups,
    rerank_depth_curve,
)
from retrieval.reporting.tenants import recall_distribution as tenant_recall
from retrieval.reporting.topology import cold_curve, recall_vs_segments

__all__ = [
    "build_costs",
    "cache_curve",
    "churn_recall",
    "cold_curve",
    "config_label",
    "embed_batch_sweep",
    "fanout_speedups",
    "live_recall",
    "p95_vs_selectivity",
    "param_surface",
    "per_query_recall",
    "profile_stages",
    "profile_waterfall",
    "recall_vs_knob",
    "recall_vs_latency",
    "recall_vs_qps",
    "recall_vs_segments",
    "recall_vs_selectivity",
    "rerank_depth_curve",
    "tenant_recall",
]
