"""Non-inferiority in the user's metric (issue 32): the target model and its test.

``QualityTarget`` is ``target: {ndcg_non_inferior: M}`` (or ``mrr_non_inferior``: MRR@10,
``recall@100_non_inferior``: recall@100 of the qrels), read by sweep specs
(:mod:`retrieval.tune.quality`: the cheapest ANN knob) and rerank specs
(:mod:`retrieval.rerank.quality`: the cheapest (ANN knob, rerank depth) pair).
:func:`non_inferiority` is the paired one-sided t-test both use: over the judged queries,
``d_q = metric(candidate) - metric(reference)``; H0 mean(d) <= -M; the candidate is
non-inferior when the lower ``1 - alpha`` confidence bound of mean(d) is > -M (p < alpha).
Metrics and margins are in the metric's points (0..1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

#: a quality target's keys -> (the metric against the qrels, the results it needs)
QUALITY_KEYS: dict[str, tuple[str, int]] = {
    "ndcg_non_inferior": ("ndcg@10", 10),
    "mrr_non_inferior": ("mrr@10", 10),
    "recall@100_non_inferior": ("recall@100", 100),
}


class QualityTarget(BaseModel):
    """``target:`` a target in the user's metric, beside the recall target (issue 32 item 2).

    Exactly one of ``ndcg_non_inferior`` (nDCG@10), ``mrr_non_inferior`` (MRR@10) or
    ``recall@100_non_inferior`` (recall@100 of the qrels): the margin M in (0, 1), in that
    metric's points. A sweep spec: the cheapest knob value whose metric against the dataset's
    qrels is non-inferior to exact search's by M (needs ``k`` >= the metric's depth); a rerank
    spec: the cheapest (ANN knob, rerank depth) pair non-inferior to exact search reranked at
    the largest depth. The test: paired one-sided t-test over the judged tuning queries at
    level ``alpha`` (the lower ``1 - alpha`` confidence bound of mean(metric_candidate -
    metric_reference) > -M). Needs a dataset with relevance judgments (``kind: text`` with
    ``scifact``, ``cranfield`` or ``beir:<folder>`` in a sweep spec).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    ndcg_non_inferior: float | None = Field(None, gt=0.0, lt=1.0)
    mrr_non_inferior: float | None = Field(None, gt=0.0, lt=1.0)
    recall_at_100_non_inferior: float | None = Field(None, gt=0.0, lt=1.0,
                                                     alias="recall@100_non_inferior")
    alpha: float = Field(0.05, gt=0.0, lt=0.5)

    @model_validator(mode="after")
    def _exactly_one(self) -> QualityTarget:
        given = [k for k in QUALITY_KEYS if self._margin_of(k) is not None]
        if len(given) != 1:
            raise ValueError(f"exactly one of {', '.join(QUALITY_KEYS)}; received "
                             f"{', '.join(given) or 'none'}")
        return self

    def _margin_of(self, key: str) -> float | None:
        value: float | None = getattr(self, key.replace("@", "_at_"))
        return value

    @property
    def key(self) -> str:
        """The target's key as written, e.g. ``ndcg_non_inferior``."""
        return next(k for k in QUALITY_KEYS if self._margin_of(k) is not None)

    @property
    def margin(self) -> float:
        """M, in the metric's points."""
        value = self._margin_of(self.key)
        assert value is not None
        return value

    @property
    def metric(self) -> str:
        """The metric against the qrels: ``ndcg@10``, ``mrr@10`` or ``recall@100``."""
        return QUALITY_KEYS[self.key][0]

    @property
    def depth(self) -> int:
        """Results the metric reads per query (``k`` must be at least this)."""
        return QUALITY_KEYS[self.key][1]

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The key given and ``alpha`` (the others are None)."""
        out: dict[str, Any] = handler(self)
        return {k: v for k, v in out.items() if v is not None}



@dataclass(frozen=True)
class NonInferiority:
    """The paired one-sided test of ``d = metric(knob) - metric(reference)`` per query.

    ``lower_bound``: the one-sided ``1 - alpha`` lower confidence bound of mean(d) (None with
    fewer than 2 queries); ``p_value``: of H0 mean(d) <= -margin; ``holds``: lower_bound > -margin.
    """

    n: int
    mean_diff: float
    sd: float
    lower_bound: float | None
    p_value: float
    margin: float
    alpha: float
    holds: bool

    def to_dict(self) -> dict[str, Any]:
        return {"n_queries": self.n, "mean_diff": self.mean_diff, "sd": self.sd,
                "lower_bound": self.lower_bound, "p_value": self.p_value,
                "non_inferior": self.holds}


def non_inferiority(diff: Sequence[float] | np.ndarray, margin: float,
                    alpha: float = 0.05) -> NonInferiority:
    """Paired one-sided t-test of non-inferiority by ``margin`` (see the module doc)."""
    from scipy import stats

    d = np.asarray(diff, dtype=np.float64)
    n = int(d.size)
    if n < 2:
        mean = float(d.mean()) if n else 0.0
        return NonInferiority(n, mean, 0.0, None, 1.0, margin, alpha, False)
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    if se <= 1e-15:  # every difference equal: no spread, the mean is the bound
        holds = mean > -margin
        return NonInferiority(n, mean, sd, mean, 0.0 if holds else 1.0, margin, alpha, holds)
    lower = mean - float(stats.t.ppf(1.0 - alpha, n - 1)) * se
    p = float(stats.t.sf((mean + margin) / se, n - 1))
    return NonInferiority(n, mean, sd, lower, p, margin, alpha, lower > -margin)


__all__ = ["QUALITY_KEYS", "NonInferiority", "QualityTarget", "non_inferiority"]
