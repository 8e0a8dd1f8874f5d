"""One configuration (knob value, rerank depth, cache threshold) scored end to end from the
measurements of both legs. Pure functions: no model, index or Redis is touched here.

The end-to-end path of a query: embed it (needed by the cache and by retrieval), look it up in
the semantic cache; on a hit return the cached answer, on a miss search the index (fetching
``max(depth, k)`` candidates), rerank the top ``depth``, and call the LLM.

- **Quality** (nDCG@k, 0..1): a miss is served by the retrieval path (its per-query nDCG@k on
  SciFact); a correct hit returns the answer cached for a labelled duplicate, produced by the
  same path, so it scores what the path scores; a false hit returns another question's answer
  and scores 0. So ``ndcg_e2e = (1 - false_hit_rate) * ndcg_path``. The hit and false-hit rates
  come from the QQP traffic (SciFact claims have no duplicates), per probe.
- **Latency** (ms): hit = embed + lookup; miss = embed + lookup + search + rerank. The
  end-to-end distribution is the mixture (weight ``hit_rate`` / ``1 - hit_rate``). Search times
  are every query's own; embed + rerank times those of the timed sample queries (one sum per
  sampled query); the two combine as independent draws (every query's search with every
  sampled query's model time); the lookup is its measured mean. p95 is the 95th percentile of
  that mixture.
- **Cost** (USD per 1,000 queries): ``1000 * ((1 - hit_rate) * usd_per_llm_call + mean_ms /
  3.6e6 * usd_per_host_hour) + usd_per_1k_lookups`` (see :class:`retrieval.study.spec.CostModel`).
- **Constraints** (feasible when <= 0): ``target_recall - recall_lb`` (bootstrap lower bound of
  the path's recall@k against exact dense search) and ``false_hit_upper_bound - cap``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from retrieval.stats.pareto import pareto_indices as nondominated
from retrieval.study.cache_leg import CacheTables
from retrieval.study.retrieval_leg import RetrievalTables
from retrieval.study.spec import StudySpec
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import lower_bound


@dataclass(frozen=True)
class Config:
    knob: int
    depth: int
    threshold: float

    def as_dict(self, knob_name: str = "knob") -> dict[str, Any]:
        return {knob_name: self.knob, "depth": self.depth, "threshold": self.threshold}


@dataclass(frozen=True)
class Outcome:
    """A config scored on one split. Units: 0..1 rates/quality, ms, USD per 1,000 queries."""

    ndcg_e2e: float
    ndcg_path: float
    recall: float
    recall_lb: float
    hit_rate: float
    correct_hit_rate: float
    false_hit_rate: float
    false_hit_upper_bound: float
    p50_ms: float
    p95_ms: float
    mean_ms: float
    miss_p95_ms: float
    usd_per_1k: float
    recall_violation: float
    false_hit_violation: float

    @property
    def feasible(self) -> bool:
        return self.recall_violation <= 0 and self.false_hit_violation <= 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "feasible": self.feasible}


def weighted_quantiles(values: list[np.ndarray], weights: list[float],
                       qs: tuple[float, ...]) -> list[float]:
    """Quantiles of a mixture: group ``i`` has total weight ``weights[i]`` spread evenly over
    its ``values[i]`` (the inverse of the mixture CDF; lower value at a step)."""
    parts = [(np.asarray(v, dtype=np.float64), w) for v, w in zip(values, weights)
             if w > 0 and len(v)]
    x = np.concatenate([v for v, _ in parts])
    wt = np.concatenate([np.full(len(v), w / len(v)) for v, w in parts])
    order = np.argsort(x, kind="stable")
    x, cum = x[order], np.cumsum(wt[order])
    cum /= cum[-1]
    return [float(x[min(int(np.searchsorted(cum, q - 1e-12)), len(x) - 1)]) for q in qs]


class Scorer:
    """Scores configs on a split, caching the per-(value, depth) path figures."""

    def __init__(self, spec: StudySpec, rt: RetrievalTables, ct: CacheTables) -> None:
        self.spec, self.rt, self.ct = spec, rt, ct
        c = spec.constraints
        self._conf = ConfidenceSpec(method="bootstrap", level=c.confidence,
                                    resamples=c.resamples)
        self._path = lru_cache(maxsize=None)(self._path_figures)
        self._scored: dict[tuple[Config, str], Outcome] = {}

    def mask(self, split: str) -> np.ndarray:
        if split == "tuning":
            return self.rt.tuning
        if split == "heldout":
            return ~self.rt.tuning
        return np.ones_like(self.rt.tuning)

    def _path_figures(self, knob: int, depth: int, split: str) -> tuple[float, float, float]:
        vi, di = self.rt.values.index(knob), self.rt.depths.index(depth)
        m = self.mask(split)
        rec = self.rt.recall[vi, di, m]
        lb = lower_bound(rec, self.spec.retrieval.k, self._conf, self.spec.seed)
        return float(self.rt.ndcg[vi, di, m].mean()), float(rec.mean()), float(lb)

    def latency(self, cfg: Config, hit_rate: float) -> tuple[float, float, float, float]:
        """(p50, p95, mean, miss-only p95) of the end-to-end latency in ms."""
        rt = self.rt
        vi, di = rt.values.index(cfg.knob), rt.depths.index(cfg.depth)
        fi = rt.fetch_index(cfg.depth, self.spec.retrieval.k)
        lookup = self.ct.lookup_mean_ms
        hit = rt.embed_ms + lookup
        model = rt.embed_ms + rt.rerank_ms[di] + lookup
        miss = (rt.search_ms[vi, fi][:, None] + model[None, :]).ravel()
        p50, p95 = weighted_quantiles([hit, miss], [hit_rate, 1.0 - hit_rate], (0.5, 0.95))
        mean = hit_rate * float(hit.mean()) + (1.0 - hit_rate) * float(miss.mean())
        return p50, p95, mean, float(np.percentile(miss, 95))

    def score(self, cfg: Config, split: str) -> Outcome:
        key = (cfg, split)
        if key not in self._scored:
            self._scored[key] = self._score(cfg, split)
        return self._scored[key]

    def _score(self, cfg: Config, split: str) -> Outcome:
        ndcg_path, recall, recall_lb = self._path(cfg.knob, cfg.depth, split)
        cache = self.ct.at(split, cfg.threshold)
        h, f = cache["hit_rate"], cache["false_hit_rate"]
        p50, p95, mean, miss95 = self.latency(cfg, h)
        c = self.spec.cache.cost
        usd = 1000.0 * ((1.0 - h) * c.usd_per_call
                        + mean / 3.6e6 * self.spec.cost.usd_per_host_hour) + c.usd_per_1k_lookups
        return Outcome(
            ndcg_e2e=(1.0 - f) * ndcg_path, ndcg_path=ndcg_path, recall=recall,
            recall_lb=recall_lb, hit_rate=h, correct_hit_rate=cache["correct_hit_rate"],
            false_hit_rate=f, false_hit_upper_bound=cache["false_hit_upper_bound"],
            p50_ms=p50, p95_ms=p95, mean_ms=mean, miss_p95_ms=miss95, usd_per_1k=usd,
            recall_violation=self.spec.constraints.target_recall - recall_lb,
            false_hit_violation=cache["false_hit_upper_bound"]
            - self.spec.cache.tuning.max_false_hit,
        )


def dominates(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """Objective vectors (ndcg max, p95 min, cost min): ``a`` no worse everywhere, better once."""
    ge = a[0] >= b[0] and a[1] <= b[1] and a[2] <= b[2]
    return ge and (a[0] > b[0] or a[1] < b[1] or a[2] < b[2])


def pareto_indices(objs: list[tuple[float, float, float]]) -> list[int]:
    """Indices of the non-dominated objective vectors (ndcg max, p95 min, cost min)."""
    return nondominated(objs, (True, False, False))


def objectives(o: Outcome) -> tuple[float, float, float]:
    return (o.ndcg_e2e, o.p95_ms, o.usd_per_1k)


__all__ = [
    "Config",
    "Outcome",
    "Scorer",
    "dominates",
    "objectives",
    "pareto_indices",
    "weighted_quantiles",
]
