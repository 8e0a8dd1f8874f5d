"""The summary.json of ``rwb tune rerank`` (run kind ``rerank-sweep``): its typed model."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from retrieval.adaptive.result import AdaptiveEntry
from retrieval.runs import RunKind, RunSummary, SummaryPart, run_summary


class DepthPoint(SummaryPart):
    """One depth: metric means per split (0..1) and whole-stage latency (ms)."""

    depth: int | None = None
    tuning: dict[str, float] = Field(default_factory=dict)
    heldout: dict[str, float] = Field(default_factory=dict)
    all: dict[str, float] = Field(default_factory=dict)  # in the curve only
    latency: dict[str, Any] = Field(default_factory=dict)


class RouterSummary(SummaryPart):
    """The BM25 fallback router: threshold on the dense top-1 similarity, tuned and held out."""

    rule: str | None = None
    threshold: float | None = None
    threshold_unit: str | None = None
    policy: str | None = None
    primary_rerank_depth: int | None = None
    primary_latency_mode: str | None = None
    fallback_latency_mode: str | None = None
    tolerance: float | None = None
    tuning: dict[str, Any] = Field(default_factory=dict)
    heldout: dict[str, dict[str, Any]] = Field(default_factory=dict)  # chosen / never / always
    heldout_metrics: dict[str, float] = Field(default_factory=dict)
    #: chosen vs never routing on the held-out queries
    #: (:func:`retrieval.rerank.run.router_verdict`)
    heldout_verdict: dict[str, Any] = Field(default_factory=dict)


class RerankerInfo(SummaryPart):
    kind: str | None = None
    name: str | None = None


@run_summary
class RerankSweepSummary(RunSummary):
    """summary.json of ``rwb tune rerank`` (no ``kind`` key on disk: the manifest names it)."""

    KIND: ClassVar[RunKind] = RunKind("rerank-sweep")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("chosen_depth", "curve")
    RANK: ClassVar[int] = 6

    name: str | None = None
    run_dir: str | None = None
    dataset: str | None = None
    dataset_path: str | None = None  # the file or folder read
    dataset_split: str | None = None
    dataset_info: dict[str, Any] | None = None  # name, spec, path, fingerprint, counts
    dataset_fingerprint: str | None = None
    relevance: str | None = None
    n_docs: int | None = None
    n_queries: int | None = None
    n_tuning: int | None = None
    n_heldout: int | None = None
    dense_ndcg: float | None = Field(None, alias="dense_ndcg@10")
    bm25_ndcg: float | None = Field(None, alias="bm25_ndcg@10")
    first_stage: dict[str, Any] = Field(default_factory=dict)
    bm25: dict[str, Any] | None = None  # the pinned convention
    dense: dict[str, Any] | None = None  # backend, metric, build, search, embedder
    sweep_first_stage: str | None = None
    run_file: dict[str, Any] | None = None  # first stage from a TREC run file
    trec_runs: dict[str, str] = Field(default_factory=dict)  # role -> file in the run dir
    reranker: RerankerInfo = Field(default_factory=RerankerInfo)
    selection_metric: str | None = None
    tolerance: float | None = None
    chosen_depth: int | None = None
    no_rerank_wins: bool | None = None
    best_depth: int | None = None
    chosen: DepthPoint | None = None
    curve: list[DepthPoint] = Field(default_factory=list)
    latency_mode: str | None = None
    latency_sample_queries: int | None = None
    evaluation_policy: str | None = None
    evaluation_counts: dict[str, Any] = Field(default_factory=dict)
    unknown_judged_doc_ids: dict[str, list[str]] = Field(default_factory=dict)
    router: RouterSummary | None = None
    #: the router vs the tuned fixed rerank depth at equal mean and p5 quality (held-out;
    #: retrieval.rerank.adaptive), when the router ran
    adaptive: list[AdaptiveEntry] | None = None
    #: ``target:`` the cheapest (ANN knob, rerank depth) pair non-inferior to exact search
    #: reranked at the largest depth, beside the recall-0.95 choice (retrieval.rerank.quality)
    quality: dict[str, Any] | None = None

    def curve_at(self, depth: int | None) -> DepthPoint | None:
        """The curve's row at ``depth`` (None when the curve has none)."""
        return next((row for row in self.curve if row.depth == depth), None)


__all__ = ["DepthPoint", "RerankSweepSummary", "RerankerInfo", "RouterSummary"]
