"""Pure fusion logic (numpy): the legs' candidates in one table, RRF / convex fusion with
min-max, z-score and DBSF normalisation, top-k, and the paired randomisation test.

Conventions (golden-tested in tests/fusion_tune/test_fusion_tune_logic.py):

- A *leg* is one ranked list per query: corpus positions best first with similarities (higher is
  better). A leg at depth ``d`` contributes only its top ``d``.
- **RRF**: ``score(doc) = sum over legs holding it of w_leg / (k + rank)``, rank from 1 (as
  :func:`retrieval.fusion.rrf`, ranx, Milvus ``RRFRanker(k)`` and Qdrant ``Fusion.RRF``).
- **convex**: ``score(doc) = sum over legs holding it of w_leg * norm(score)``, where ``norm`` is
  taken per query over the leg's top ``d``: ``min-max`` ``(s - min) / (max - min)`` (1.0 when all
  are equal); ``z-score`` ``(s - mean) / std`` (population std; 0.0 when std is 0); ``dbsf``
  (Qdrant's distribution-based score fusion) ``(s - (mean - 3 std)) / (6 std)`` clipped to
  [0, 1] with the *sample* std (n - 1, as Qdrant's engine computes it; 0.5 when std is 0).
  A leg that did not return the document adds nothing (0).
- Weights: with two legs, the dense leg's share ``w`` and BM25's ``1 - w`` (``alpha`` = w);
  with three (dense, bm25, sparse), triples of the listed weights normalised to sum 1.
- Ties in the fused score are broken by corpus position (ascending), so every fusion is
  deterministic and a TREC file written in this order is read back in this order by ranx.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import numpy as np

#: RRF's usual constant (Cormack et al. 2009); the ``rrf60`` baseline uses it with equal weights
RRF60_K = 60


@dataclass(frozen=True, eq=False)
class LegTable:
    """Every query's union of the legs' candidates.

    ``doc_idx`` int64 ``(nq, U)``: corpus positions, -1 = padding; ``ranks[leg]`` int64
    ``(nq, U)``: the doc's rank in that leg (1 = best), 0 = absent; ``scores[leg]`` float64
    ``(nq, U)``: the leg's similarity, NaN where absent.
    """

    legs: tuple[str, ...]
    doc_idx: np.ndarray
    ranks: dict[str, np.ndarray]
    scores: dict[str, np.ndarray]


def leg_table(legs: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> LegTable:
    """Build the union table from ``leg -> (doc_idx (nq, k), scores (nq, k))`` (-1 = none)."""
    names = tuple(legs)
    nq = int(next(iter(legs.values()))[0].shape[0])
    rows: list[np.ndarray] = []
    for i in range(nq):
        docs = np.concatenate([np.asarray(legs[n][0][i]) for n in names])
        rows.append(np.unique(docs[docs >= 0]))
    width = max(1, max((len(r) for r in rows), default=1))
    doc_idx = np.full((nq, width), -1, dtype=np.int64)
    ranks = {n: np.zeros((nq, width), dtype=np.int64) for n in names}
    scores = {n: np.full((nq, width), np.nan) for n in names}
    for i, row in enumerate(rows):
        doc_idx[i, : len(row)] = row
        pos = {int(d): j for j, d in enumerate(row.tolist())}
        for n in names:
            ids, sc = legs[n][0][i], legs[n][1][i]
            rank = 0
            for d, s in zip(ids.tolist(), sc.tolist()):
                if d < 0:
                    continue
                rank += 1
                j = pos[int(d)]
                if ranks[n][i, j] == 0:  # a leg naming a doc twice: its best rank counts
                    ranks[n][i, j] = rank
                    scores[n][i, j] = float(s)
    return LegTable(names, doc_idx, ranks, scores)


@dataclass(frozen=True)
class Candidate:
    """One fusion setting. ``weights`` / ``depths`` are aligned with the table's legs;
    ``rrf_k`` for ``rrf``; ``normalisation`` for ``convex``."""

    method: str
    weights: tuple[float, ...]
    depths: tuple[int, ...]
    rrf_k: int | None = None
    normalisation: str | None = None
    legs: tuple[str, ...] = field(default=("dense", "bm25"))

    def params(self) -> dict[str, Any]:
        """The settings as plain data (``weights`` / ``depths`` keyed by leg)."""
        out: dict[str, Any] = {
            "weights": {leg: round(w, 6) for leg, w in zip(self.legs, self.weights)},
            "depths": dict(zip(self.legs, self.depths)),
        }
        if self.method == "rrf":
            out["k"] = self.rrf_k
        else:
            out["normalisation"] = self.normalisation
            out["alpha"] = round(self.weights[0], 6)
        return out

    @property
    def label(self) -> str:
        w = "/".join(f"{x:g}" for x in self.weights)
        d = "/".join(str(x) for x in self.depths)
        how = f"k={self.rrf_k}" if self.method == "rrf" else str(self.normalisation)
        return f"{self.method}({how}, w={w}, depth={d})"


def rrf60(legs: Sequence[str], depth: int) -> Candidate:
    """The baseline: RRF with k = 60 and equal weights, every leg at ``depth``."""
    n = len(legs)
    return Candidate("rrf", (1.0,) * n, (depth,) * n, rrf_k=RRF60_K, legs=tuple(legs))


def single_leg(legs: Sequence[str], leg: str, depth: int) -> Candidate:
    """One leg alone (weight 1, the others 0): its own ranking."""
    w = tuple(1.0 if n == leg else 0.0 for n in legs)
    return Candidate("rrf", w, (depth,) * len(legs), rrf_k=RRF60_K, legs=tuple(legs))


def weight_vectors(weights: Sequence[float], n_legs: int) -> list[tuple[float, ...]]:
    """The legs' weights tried. Two legs: the dense share ``w`` and BM25's ``1 - w``. Three:
    every triple of ``weights`` normalised to sum 1 (rounded to 6 decimals), duplicates and
    all-zero triples dropped, first-seen order."""
    if n_legs == 2:
        return [(float(w), round(1.0 - float(w), 10)) for w in weights]
    out: dict[tuple[float, ...], None] = {}
    for combo in product(weights, repeat=n_legs):
        total = float(sum(combo))
        if total > 0:
            out.setdefault(tuple(round(float(w) / total, 6) for w in combo), None)
    return list(out)


def grid(methods: Sequence[str], normalisations: Sequence[str], weights: Sequence[float],
         rrf_ks: Sequence[int], depths: Sequence[int],
         legs: Sequence[str] = ("dense", "bm25")) -> list[Candidate]:
    """Every combination of method, weights (:func:`weight_vectors`) and each leg's depth."""
    if len(legs) not in (2, 3):
        raise ValueError("grid: two legs (dense, bm25) or three (and sparse) are tuned")
    out: list[Candidate] = []
    tuples = list(product(sorted(depths), repeat=len(legs)))
    for m in methods:
        for ws in weight_vectors(weights, len(legs)):
            for d in tuples:
                if m == "rrf":
                    out += [Candidate("rrf", ws, d, rrf_k=int(k), legs=tuple(legs))
                            for k in rrf_ks]
                else:
                    out += [Candidate("convex", ws, d, normalisation=n, legs=tuple(legs))
                            for n in normalisations]
    return out


def normalise(scores: np.ndarray, present: np.ndarray, how: str) -> np.ndarray:
    """Per-row normalisation over the ``present`` entries (see the module docstring); 0 where
    absent. ``scores`` float64 ``(nq, U)``."""
    n = present.sum(axis=1, keepdims=True)
    x = np.where(present, scores, 0.0)
    safe_n = np.maximum(n, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        if how == "min-max":
            lo = np.where(present, scores, np.inf).min(axis=1, keepdims=True)
            hi = np.where(present, scores, -np.inf).max(axis=1, keepdims=True)
            span = hi - lo
            out = np.where(span > 0, (x - lo) / np.where(span > 0, span, 1.0), 1.0)
        else:
            mean = x.sum(axis=1, keepdims=True) / safe_n
            var = (np.where(present, (scores - mean) ** 2, 0.0)).sum(axis=1, keepdims=True)
            std = np.sqrt(var / safe_n)
            ok = std > 0
            div = np.where(ok, std, 1.0)
            if how == "z-score":
                out = np.where(ok, (x - mean) / div, 0.0)
            elif how == "dbsf":  # Qdrant's: the sample std (n - 1), checked against its engine
                sd = np.sqrt(var / np.maximum(n - 1, 1))
                sd = np.where(ok, sd, 1.0)
                out = np.where(ok, np.clip((x - (mean - 3 * sd)) / (6 * sd), 0.0, 1.0), 0.5)
            else:
                raise ValueError(f"normalisation must be min-max, z-score or dbsf; got {how!r}")
    return np.where(present, out, 0.0)


def fuse(table: LegTable, cand: Candidate) -> np.ndarray:
    """Fused score of every table entry (float64 ``(nq, U)``; -inf where no leg holds the doc
    within its depth, or the doc only comes from legs of weight 0)."""
    total = np.zeros(table.doc_idx.shape)
    hit = np.zeros(table.doc_idx.shape, dtype=bool)
    for leg, w, d in zip(cand.legs, cand.weights, cand.depths):
        r = table.ranks[leg]
        present = (r > 0) & (r <= d)
        if w <= 0:
            continue
        hit |= present
        if cand.method == "rrf":
            assert cand.rrf_k is not None
            total += np.where(present, w / (cand.rrf_k + np.maximum(r, 1)), 0.0)
        else:
            total += w * normalise(table.scores[leg], present, str(cand.normalisation))
    return np.where(hit & (table.doc_idx >= 0), total, -np.inf)


def top_k(table: LegTable, fused: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(doc_idx, scores) of each query's top ``k`` by fused score, ties by corpus position;
    -1 / -inf past the docs that have a score."""
    big = np.iinfo(np.int64).max
    pos = np.where(table.doc_idx >= 0, table.doc_idx, big)
    order = np.lexsort((pos, -fused), axis=1)[:, :k]
    docs = np.take_along_axis(table.doc_idx, order, axis=1)
    vals = np.take_along_axis(fused, order, axis=1)
    docs = np.where(np.isfinite(vals), docs, -1)
    if docs.shape[1] < k:
        pad = k - docs.shape[1]
        docs = np.pad(docs, ((0, 0), (0, pad)), constant_values=-1)
        vals = np.pad(vals, ((0, 0), (0, pad)), constant_values=-np.inf)
    return docs, vals


@dataclass(frozen=True)
class PairedTest:
    """A paired comparison over queries: ``mean_diff`` = mean(a - b) (metric units, 0..1),
    ``p_value`` two-sided (randomisation test, sign flips), ``p_ttest`` (paired t-test)."""

    mean_diff: float
    p_value: float
    p_ttest: float
    n_queries: int
    resamples: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean_diff": self.mean_diff, "p_value": self.p_value, "p_ttest": self.p_ttest,
                "n_queries": self.n_queries, "resamples": self.resamples,
                "test": "paired randomisation (sign flips), two-sided"}


def paired_test(a: np.ndarray, b: np.ndarray, resamples: int = 10_000,
                seed: int = 0) -> PairedTest:
    """Two-sided paired randomisation test of mean(a - b) = 0 over queries (Fisher; the
    p-value counts the observed assignment: ``(hits + 1) / (resamples + 1)``), plus the paired
    t-test's p (1.0 when every difference is 0)."""
    from scipy import stats

    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = diff.size
    obs = float(diff.mean()) if n else 0.0
    if n == 0 or not np.any(diff):
        return PairedTest(obs, 1.0, 1.0, n, resamples)
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    chunk = max(1, min(resamples, 2_000_000 // max(n, 1)))
    while done < resamples:
        m = min(chunk, resamples - done)
        signs = rng.integers(0, 2, size=(m, n), dtype=np.int8) * 2 - 1
        perm = (signs * diff).mean(axis=1)
        hits += int(np.count_nonzero(np.abs(perm) >= abs(obs) - 1e-12))
        done += m
    p = (hits + 1) / (resamples + 1)
    t = stats.ttest_rel(a, b)
    p_t = float(t.pvalue) if np.isfinite(t.pvalue) else 1.0
    return PairedTest(obs, float(p), p_t, n, resamples)


__all__ = ["RRF60_K", "Candidate", "LegTable", "PairedTest", "fuse", "grid", "leg_table",
           "normalise", "paired_test", "rrf60", "single_leg", "top_k", "weight_vectors"]
