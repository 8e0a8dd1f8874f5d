"""Fusing ranked lists from several collections: score merge and reciprocal rank fusion (RRF).

A *ranked list* is a sequence of ``(doc_key, score)`` pairs, best first, where a higher score is
better (rwb search results carry distances, lower is closer: convert with :func:`from_distances`,
which uses ``score = -distance``; for cosine that is ``cos - 1``, in -2..0).

- :func:`score_merge`: union of the lists, a doc appearing more than once keeps its best score,
  sorted by score. When every list comes from the same metric and embedding model (comparable
  scores), and each list is the exact top-k of its collection, the result equals the exact top-k
  of one index over the union of the collections (tested in tests/core/test_fusion.py).
- :func:`rrf`: reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009),
  ``score(d) = sum_i w_i / (k + rank_i(d))`` with ranks **starting at 1** (the best doc of a
  list has rank 1) and ``k`` = 60 by default. A doc appearing in several lists is counted once
  per list (its contributions add up) and appears once in the output (dedupe by doc key); within
  one list only its first (best) occurrence counts. Weights default to 1.
- :func:`rrf_ranx`: the same unweighted RRF for many queries at once through
  ``ranx.fuse(method="rrf", norm=None)``, whose convention is also ``1 / (k + rank)`` with ranks
  from 1 (``ranx/fusion/rrf.py``: ``1 / (k + i + 1)`` over the list sorted best first). It is the
  reference the hand-written version is checked against; the per-query hot path uses
  :func:`rrf` (building ranx's numba structures per query costs milliseconds, and ranx has no
  weighted RRF).

Ties are broken by doc key (ascending) so every fusion is deterministic.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from retrieval.errors import ConfigError, param_error

Ranked = Sequence[tuple[str, float]]

DEFAULT_RRF_K = 60


def from_distances(ids: np.ndarray, distances: np.ndarray, keys: Sequence[str] | None = None,
                   prefix: str = "") -> list[tuple[str, float]]:
    """One ranked list from one row of a search result.

    ``ids``: int64 row of result ids (-1 = no result, skipped); ``distances``: rwb distances
    (lower is closer). ``keys`` maps an id to its doc key (``keys[id]``); without it the id
    itself is the key. ``prefix`` is prepended to every key (e.g. ``"scifact/"``).
    Returns ``[(doc_key, -distance), ...]`` best first.
    """
    out: list[tuple[str, float]] = []
    for i, d in zip(np.asarray(ids).tolist(), np.asarray(distances).tolist()):
        if i < 0 or not math.isfinite(d):
            continue
        key = keys[i] if keys is not None else str(i)
        out.append((f"{prefix}{key}", -float(d)))
    return out


def _check_k(k: int, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise param_error(name, "an integer >= 1", k, where="fusion")
    return int(k)


def _sorted(scores: Mapping[str, float], k: int) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def score_merge(lists: Mapping[str, Ranked], k: int) -> list[tuple[str, float]]:
    """Top-``k`` of the union of ``lists`` (name -> ranked list) by score, higher first.

    Only meaningful when scores are comparable (same metric, same embedding model); the fan-out
    layer checks that before calling. A doc in several lists keeps its best score.
    """
    k = _check_k(k)
    best: dict[str, float] = {}
    for ranked in lists.values():
        for key, score in ranked:
            if key not in best or score > best[key]:
                best[key] = float(score)
    return _sorted(best, k)


def rrf_weights(names: Sequence[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    """Weight per list name (default 1.0); unknown names or weights < 0 raise ConfigError."""
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(names))
    if unknown:
        raise ConfigError(
            f"fusion: weights name unknown collection(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(names)}"
        )
    out = {}
    for name in names:
        w = float(weights.get(name, 1.0))
        if not math.isfinite(w) or w < 0:
            raise param_error(f"weights.{name}", "a finite number >= 0", w, where="fusion")
        out[name] = w
    return out


def rrf(
    lists: Mapping[str, Ranked],
    k: int,
    *,
    rrf_k: float = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ``lists`` (name -> ranked list, best first); top ``k``.

    ``score(d) = sum over lists containing d of weight / (rrf_k + rank)``, rank from 1. Only the
    order of each list matters, not its scores. ``rrf_k`` >= 0.
    """
    k = _check_k(k)
    if isinstance(rrf_k, bool) or not isinstance(rrf_k, int | float) or not (
        math.isfinite(rrf_k) and rrf_k >= 0
    ):
        raise param_error("rrf_k", "a finite number >= 0", rrf_k, where="fusion")
    w = rrf_weights(list(lists), weights)
    fused: dict[str, float] = {}
    for name, ranked in lists.items():
        seen: set[str] = set()
        rank = 0
        for key, _score in ranked:
            if key in seen:
                continue  # a list naming a doc twice: only its best rank counts
            seen.add(key)
            rank += 1
            fused[key] = fused.get(key, 0.0) + w[name] / (rrf_k + rank)
    return _sorted(fused, k)


def _ranx_run(per_query: Mapping[str, Ranked], keys: Mapping[str, str]) -> object:
    """A ranx Run whose order per query is exactly the given order (rank-based scores), its
    doc keys mapped by ``keys`` (:func:`retrieval.stats.irmetrics.ranx_keys`)."""
    from ranx import Run

    data = {}
    for qid, ranked in per_query.items():
        seen: dict[str, float] = {}
        n = len(ranked)
        for pos, (key, _score) in enumerate(ranked):
            seen.setdefault(keys[key], float(n - pos))
        data[qid] = seen
    return Run(data)


def rrf_ranx(
    runs: Mapping[str, Mapping[str, Ranked]], k: int, *, rrf_k: int = DEFAULT_RRF_K
) -> dict[str, list[tuple[str, float]]]:
    """Unweighted RRF of several runs (name -> query id -> ranked list) through ``ranx.fuse``.

    Every run must hold the same query ids, each with at least one doc (ranx's requirement).
    Returns query id -> fused top-``k`` (ties broken by doc key, as :func:`rrf`).
    """
    from ranx import fuse

    from retrieval.stats.irmetrics import ranx_keys

    k = _check_k(k)
    names = list(runs)
    if not names:
        raise ConfigError("fusion: rrf_ranx needs at least one run")
    qids = list(runs[names[0]])
    for name in names[1:]:
        if set(runs[name]) != set(qids):
            raise ConfigError(
                f"fusion: run '{name}' holds other query ids than run '{names[0]}'"
            )
    for name in names:
        empty = [q for q in qids if not runs[name][q]]
        if empty:
            raise ConfigError(
                f"fusion: run '{name}' has no results for query '{empty[0]}' (ranx needs >= 1)"
            )
    if len(names) == 1:  # ranx.fuse asserts > 1 run; one list fuses to itself
        only = runs[names[0]]
        return {q: rrf({names[0]: only[q]}, k, rrf_k=rrf_k) for q in qids}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba type-safety chatter from ranx internals
        keys = ranx_keys(*(((key for key, _ in ranked) for ranked in runs[name].values())
                           for name in names))
        ranx_runs = [_ranx_run(runs[name], keys) for name in names]
        fused = fuse(ranx_runs, norm=None, method="rrf", params={"k": rrf_k})
    doc_of = {key: d for d, key in keys.items()}
    out: dict[str, list[tuple[str, float]]] = {}
    for qid in qids:
        scores = {doc_of[str(d)]: float(s) for d, s in fused.run[qid].items()}
        out[qid] = _sorted(scores, k)
    return out


__all__ = [
    "DEFAULT_RRF_K",
    "Ranked",
    "from_distances",
    "rrf",
    "rrf_ranx",
    "rrf_weights",
    "score_merge",
]
