"""Rerank-depth sweep: quality from one scoring pass, latency from actual calls, a chosen depth.

Quality. Each query's first-stage top ``max(depths)`` is scored **once** by the reranker
(:func:`score_candidates`). Reranking at depth N then means: the top N candidates reordered by
their scores (ties keep first-stage order), the tail below N kept in first-stage order, so
recall@k at k > N stays meaningful (:func:`rerank_order`). Every depth is evaluated offline from
that one pass; the model is never re-run per depth. This is exact because rerankers are pointwise
(a passage's score does not depend on the other candidates; see :mod:`retrieval.rerank.rerankers`).

Latency. The reranker's cost is measured by actual calls at every depth on a seeded sample of
queries (:func:`time_rerank_calls`): per query, one call per depth, after warm-up calls. The
whole-stage latency of a sampled query at depth N is its measured single-query first-stage time
plus its measured rerank-call time at N (milliseconds; p50/p95 over the sample).

Choice. :func:`choose_depth` takes the smallest depth whose tuning-split quality is within
``tolerance`` (absolute) of the best depth's; depth 0 means "no rerank" wins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from retrieval.errors import ConfigError, DataError, param_error
from retrieval.rerank.firststage import Candidates
from retrieval.rerank.rerankers import Reranker, score_passages
from retrieval.stats.sampling import seeded_partition
from retrieval.timing import time_repeat, timed

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, eq=False)
class RerankScores:
    """Reranker scores of each query's first-stage top ``depth`` (one pass).

    ``scores`` float64 ``(nq, depth)``, higher is more relevant, NaN where the first stage had
    fewer candidates; ``call_ms`` float64 ``(nq,)``: wall time of each query's call (ms).
    """

    depth: int
    scores: np.ndarray
    call_ms: np.ndarray


def split_queries(
    query_ids: Sequence[str], tuning_fraction: float, seed: int
) -> tuple[list[str], list[str]]:
    """Seeded split into (tuning, held-out), each keeping the input order."""
    if not 0.0 < tuning_fraction < 1.0:
        raise param_error("tuning_fraction", "in (0, 1)", tuning_fraction, where="query split")
    ids = list(query_ids)
    if len(ids) < 2:
        raise DataError(f"query split: need at least 2 queries; received {len(ids)}")
    n_tune = min(max(1, round(tuning_fraction * len(ids))), len(ids) - 1)
    tune = set(seeded_partition(len(ids), n_tune, seed)[0].tolist())
    tuning = [q for i, q in enumerate(ids) if i in tune]
    heldout = [q for i, q in enumerate(ids) if i not in tune]
    return tuning, heldout


def score_candidates(
    reranker: Reranker,
    queries: Sequence[str],
    corpus: Sequence[str],
    candidates: Candidates,
    depth: int,
    *,
    progress: Progress | None = None,
) -> RerankScores:
    """Score each query's top ``depth`` candidates once (the quality pass)."""
    if len(queries) != candidates.doc_idx.shape[0]:
        raise DataError(
            f"score_candidates: {len(queries)} queries but {candidates.doc_idx.shape[0]} "
            f"candidate rows"
        )
    if depth < 0 or depth > candidates.k:
        raise param_error("depth", f"in [0, {candidates.k}] (candidates fetched)", depth,
                          where="score_candidates")
    out = np.full((len(queries), depth), np.nan, dtype=np.float64)
    ms = np.zeros(len(queries), dtype=np.float64)
    for i, q in enumerate(queries):
        row = candidates.row(i, depth)
        texts = [corpus[j] for j in row]
        with timed() as sw:
            s = score_passages(reranker, q, texts)
        ms[i] = sw.ms
        out[i, : len(s)] = s
        if progress is not None:
            progress(i + 1, len(queries), "rerank scoring")
    return RerankScores(depth=depth, scores=out, call_ms=ms)


def rerank_order(first: np.ndarray, scores: np.ndarray, depth: int) -> np.ndarray:
    """The top ``depth`` of ``first`` (doc positions, best first) sorted by ``scores``
    (descending; ties keep first-stage order), then the rest of ``first`` unchanged."""
    n = min(depth, len(first))
    if n <= 0:
        return np.asarray(first)
    head_scores = np.asarray(scores[:n], dtype=np.float64)
    if len(head_scores) < n or np.isnan(head_scores).any():
        raise DataError(f"rerank_order: {n} candidates need {n} scores; received {scores[:n]}")
    order = np.argsort(-head_scores, kind="stable")
    return np.concatenate([np.asarray(first[:n])[order], np.asarray(first[n:])])


def reranked_rankings(
    candidates: Candidates,
    rscores: RerankScores,
    depth: int,
    query_ids: Sequence[str],
    corpus_ids: Sequence[str],
    k: int | None = None,
) -> dict[str, list[str]]:
    """Rankings (query id -> doc ids, at most ``k``) after reranking the top ``depth``."""
    if depth > rscores.depth:
        raise ConfigError(
            f"depth {depth} exceeds the scored depth {rscores.depth}; score at the largest depth"
        )
    out: dict[str, list[str]] = {}
    for i, qid in enumerate(query_ids):
        row = candidates.row(i)
        order = rerank_order(row, rscores.scores[i], depth)
        if k is not None:
            order = order[:k]
        out[qid] = [corpus_ids[j] for j in order]
    return out


def time_rerank_calls(
    reranker: Reranker,
    queries: Sequence[str],
    passages: Sequence[Sequence[str]],
    depths: Sequence[int],
    *,
    warmup: int = 1,
    repeats: int = 1,
    progress: Progress | None = None,
) -> dict[int, np.ndarray]:
    """Per-query wall time (ms) of one rerank call at each depth > 0 (median of ``repeats``).

    ``passages[i]`` are query i's first-stage passages, best first; depth N scores the first N.
    ``warmup`` untimed calls at the largest depth on the first query come first. Depth 0 costs 0.
    """
    if len(queries) != len(passages):
        raise DataError(
            f"time_rerank_calls: {len(queries)} queries but {len(passages)} passage lists"
        )
    ds = sorted(set(int(d) for d in depths))
    out = {d: np.zeros(len(queries), dtype=np.float64) for d in ds}
    if not queries or ds[-1] == 0:
        return out
    for _ in range(warmup):
        score_passages(reranker, queries[0], list(passages[0][: ds[-1]]))
    total = len(queries) * len([d for d in ds if d > 0])
    done = 0
    for i, q in enumerate(queries):
        for d in ds:
            if d == 0:
                continue
            chunk = list(passages[i][:d])
            _, times = time_repeat(partial(score_passages, reranker, q, chunk), repeats)
            out[d][i] = float(np.median(times))
            done += 1
            if progress is not None:
                progress(done, total, f"timing rerank depth {d}")
    return out


@dataclass(frozen=True)
class DepthChoice:
    """``depth``: smallest depth within ``tolerance`` of ``best_quality`` (0 = no rerank)."""

    depth: int
    best_depth: int
    best_quality: float
    quality: float
    tolerance: float

    @property
    def no_rerank_wins(self) -> bool:
        return self.depth == 0


def choose_depth(quality_by_depth: Mapping[int, float], tolerance: float) -> DepthChoice:
    """Smallest depth whose quality >= best - ``tolerance`` (absolute, same unit as quality)."""
    if not quality_by_depth:
        raise ConfigError("choose_depth: no depths to choose from")
    if not 0.0 <= tolerance <= 1.0:
        raise param_error("tolerance", "in [0, 1]", tolerance, where="choose_depth")
    best_depth = max(sorted(quality_by_depth), key=lambda d: quality_by_depth[d])
    best = quality_by_depth[best_depth]
    for d in sorted(quality_by_depth):
        if quality_by_depth[d] >= best - tolerance - 1e-12:
            return DepthChoice(d, best_depth, float(best), float(quality_by_depth[d]), tolerance)
    raise AssertionError("unreachable: the best depth always qualifies")  # pragma: no cover


__all__ = [
    "DepthChoice",
    "RerankScores",
    "choose_depth",
    "rerank_order",
    "reranked_rankings",
    "score_candidates",
    "split_queries",
    "time_rerank_calls",
]
