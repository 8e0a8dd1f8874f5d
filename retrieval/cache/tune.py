"""Semantic-cache threshold tuning on GPTCache's Quora question pairs, against a live Redis.

The experiment (every choice below is recorded in the run directory):

- **Questions.** The 137,551 distinct question strings of the 80,854 labelled pairs get ids
  ``qid`` in first-seen order (text_a before text_b, pair by pair). A spec may use a seeded
  subset of the pairs (``pairs.limit``) plus ``distractors`` extra questions from other pairs.
- **Cache contents.** Every question of the selected pairs (both sides) and the distractors is
  stored, each once, under key ``<name>:<qid>``. So the labelled partner of every probe is in
  the cache, and every other question acts as a distractor.
- **Probes.** Each distinct ``probe_side`` question (default ``text_b``) is looked up once. Its
  own entry is excluded (leave-one-out: the probe sees a cache holding every *other* question),
  by fetching the 2 nearest entries and skipping its own key.
- **Outcome at threshold t** (cosine distance, hit iff nearest distance <= t, inclusive):
  *correct hit* if the nearest entry is a labelled duplicate of the probe (label 1 in any of the
  80,854 pairs); *false hit* if it is anything else (a labelled non-duplicate - the hard
  negatives, topically close by construction - or an unlabelled question; unlabelled true
  duplicates therefore count as false, so the false-hit rate is conservative); *miss* otherwise.
  Probes with no labelled duplicate in the cache ("negative probes") can only miss or false-hit.
- **Rates** are per probe: ``hit_rate = hits / probes``, ``false_hit_rate = false hits /
  probes``, ``precision = correct / hits``, ``duplicate_recall = correct / positive probes``.
- **Split.** Probes are split into tuning / held-out by connected component of the pair graph
  (seeded), so no question and no labelled pair spans both splits.
- **Choice.** Nearest distances are fetched once from the live Redis index (pipelined KNN
  queries); thresholds are swept offline on a grid (``grid_step``). The chosen threshold is the
  largest grid value whose one-sided upper confidence bound (Wilson or Clopper-Pearson, level
  ``confidence``) on the *tuning* false-hit rate is <= ``max_false_hit``; it maximises the hit
  rate under that constraint (hits grow with t). It is then reported on the held-out split.
- **Latency.** While filling the cache, after ``latency.sizes`` entries, single lookups
  (redisvl ``SemanticCache.check`` through :meth:`SemanticCache.lookup`, vector given, one
  client, loopback) are timed after a warm-up (:func:`retrieval.cache.live.time_lookups`,
  through :mod:`retrieval.timing`): p50/p95/p99 in ms.

Everything here is numpy on arrays already fetched; the live Redis side is
:mod:`retrieval.cache.live` and :mod:`retrieval.cache.redis`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from retrieval.cache.spec import CacheTuneSpec
from retrieval.cache.thresholds import Threshold
from retrieval.errors import ConfigError, DataError
from retrieval.stats.binomial import upper_bound

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, eq=False)
class QQPLabels:
    """Distinct questions (index = qid) and the labelled pairs as qid arrays.

    ``pair_heldout``: per pair, True when it came from an explicit held-out file (None: the
    component split decides); ``extra_qids``: texts that are in no pair (distractors read from a
    file; always stored, never probed); ``name``: what the records call the data."""

    questions: list[str]
    pair_a: np.ndarray
    pair_b: np.ndarray
    label: np.ndarray
    fingerprint: str
    pair_heldout: np.ndarray | None = None
    extra_qids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    name: str = "gptcache_qqp"

    @property
    def n_questions(self) -> int:
        return len(self.questions)


def qqp_labels(pairs: Sequence[Any] | None = None, *, heldout: Sequence[bool] | None = None,
               extra_texts: Sequence[str] = (), name: str = "gptcache_qqp") -> QQPLabels:
    """Index the labelled pairs (default: ``load_qqp_pairs("full")``). ``fingerprint`` is the
    sha256 of the pairs' texts and labels, the held-out flags and the extra texts (what a
    result was measured on; for QQP alone it is the same as before those existed)."""
    if pairs is None:
        from retrieval.loaders.shared import load_qqp_pairs

        pairs = load_qqp_pairs("full")
    if not pairs:
        raise DataError(f"{name}: no pairs")
    index: dict[str, int] = {}
    a = np.empty(len(pairs), dtype=np.int64)
    b = np.empty(len(pairs), dtype=np.int64)
    lab = np.empty(len(pairs), dtype=np.int8)
    h = hashlib.sha256()
    for i, p in enumerate(pairs):
        for arr, text in ((a, p.text_a), (b, p.text_b)):
            arr[i] = index.setdefault(text, len(index))
        if p.label not in (0, 1):
            raise DataError(f"{name}: pair {i} has label {p.label!r}; allowed 0 or 1")
        lab[i] = p.label
        h.update(f"{p.text_a}\x1f{p.text_b}\x1f{p.label}\x1e".encode())
    held = None
    if heldout is not None:
        held = np.asarray(heldout, dtype=bool)
        h.update(b"heldout:" + np.packbits(held).tobytes())
    extra = []
    for t in extra_texts:
        if t not in index:
            extra.append(index.setdefault(t, len(index)))
            h.update(f"extra\x1f{t}\x1e".encode())
    return QQPLabels(list(index), a, b, lab, f"sha256:{h.hexdigest()}", held,
                     np.asarray(extra, dtype=np.int64), name)


@dataclass(frozen=True, eq=False)
class ProbeDesign:
    """What is stored, what is probed, the split and the labels each probe is judged by."""

    stored: np.ndarray  # qids in load order
    probes: np.ndarray  # qids
    heldout: np.ndarray  # bool per probe
    positive: np.ndarray  # bool per probe: a labelled duplicate is stored
    dup: Any  # scipy CSR (n_q x n_q), 1 where the two questions are labelled duplicates
    n_pairs: int
    info: dict[str, Any] = field(default_factory=dict)

    def is_duplicate(self, probes: np.ndarray, nn: np.ndarray) -> np.ndarray:
        ok = nn >= 0
        out = np.zeros(len(probes), dtype=bool)
        if ok.any():
            out[ok] = np.asarray(self.dup[probes[ok], nn[ok]]).ravel() > 0
        return out


def design_probes(labels: QQPLabels, spec: CacheTuneSpec) -> ProbeDesign:
    """Select pairs, stored questions, probes and the component split (all seeded)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n_pairs_all, nq = len(labels.label), labels.n_questions
    ph = labels.pair_heldout
    pool_pairs = np.arange(n_pairs_all) if ph is None else np.flatnonzero(~ph)
    sel = pool_pairs
    if spec.pairs.limit is not None:
        if spec.pairs.limit > len(pool_pairs):
            raise ConfigError(f"{spec.source}: field 'pairs.limit' must be <= "
                              f"{len(pool_pairs)} (pairs available); received "
                              f"{spec.pairs.limit}")
        rng = np.random.default_rng(spec.pairs.seed)
        sel = np.sort(rng.choice(pool_pairs, spec.pairs.limit, replace=False))
    if ph is not None:  # an explicit held-out file: all its pairs take part
        sel = np.sort(np.concatenate([sel, np.flatnonzero(ph)]))
    a, b = labels.pair_a[sel], labels.pair_b[sel]
    in_pairs = np.unique(np.concatenate([a, b]))
    if labels.extra_qids.size:  # distractor texts from a file: all stored
        in_pairs = np.union1d(in_pairs, labels.extra_qids)
    stored = in_pairs
    if spec.distractors:
        pool = np.setdiff1d(np.arange(nq), in_pairs, assume_unique=True)
        if spec.distractors > len(pool):
            raise ConfigError(f"{spec.source}: field 'distractors' must be <= {len(pool)} "
                              f"(questions outside the selected pairs); received "
                              f"{spec.distractors}")
        extra = np.random.default_rng(spec.pairs.seed + 1).choice(pool, spec.distractors,
                                                                   replace=False)
        stored = np.union1d(in_pairs, extra)
    stored = np.random.default_rng(spec.pairs.seed + 2).permutation(stored)
    probes = np.unique(b if spec.probe_side == "text_b" else a)

    pos = labels.label == 1
    rows = np.concatenate([labels.pair_a[pos], labels.pair_b[pos]])
    cols = np.concatenate([labels.pair_b[pos], labels.pair_a[pos]])
    dup = coo_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(nq, nq)).tocsr()
    stored_mask = np.zeros(nq, dtype=np.int8)
    stored_mask[stored] = 1
    positive = (dup[probes] @ stored_mask) > 0

    overlap = 0
    if ph is None:
        graph = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(nq, nq))
        _, comp = connected_components(graph, directed=False)
        u = np.random.default_rng(spec.split.seed).random(int(comp.max()) + 1)
        heldout = u[comp[probes]] < spec.split.heldout_fraction
        split_note = (f"by connected component, heldout_fraction "
                      f"{spec.split.heldout_fraction}, seed {spec.split.seed}")
    else:
        side = labels.pair_b if spec.probe_side == "text_b" else labels.pair_a
        held_sel, tune_sel = sel[ph[sel]], sel[~ph[sel]]
        heldout = np.isin(probes, side[held_sel])
        overlap = int((heldout & np.isin(probes, side[tune_sel])).sum())
        split_note = ("explicit held-out file: its probes are held out (a probe found in both "
                      "files counts as held-out)")
    info = {
        "n_pairs": len(sel), "n_pairs_available": n_pairs_all,
        "n_positive_pairs": int((labels.label[sel] == 1).sum()),
        "n_stored": len(stored), "n_distractors": spec.distractors,
        "n_probes": len(probes), "n_tuning": int((~heldout).sum()),
        "n_heldout": int(heldout.sum()), "probe_side": spec.probe_side,
        "positive_fraction": float(positive.mean()),
        "split": split_note, "n_probes_in_both_files": overlap,
        "n_distractor_texts": int(labels.extra_qids.size),
        "data": labels.name,
        "fingerprint": labels.fingerprint,
    }
    return ProbeDesign(stored, probes, heldout, np.asarray(positive).ravel(), dup, len(sel),
                       info)


# --------------------------------------------------------------------------- sweep


@dataclass(frozen=True)
class SplitMetrics:
    """Outcome counts and per-probe rates at one threshold (cosine distance)."""

    threshold: float
    probes: int
    positive_probes: int
    hits: int
    correct_hits: int
    false_hits: int
    hit_rate: float
    correct_hit_rate: float
    false_hit_rate: float
    precision: float | None
    duplicate_recall: float | None
    false_hit_upper_bound: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sweep_counts(
    dist: np.ndarray, correct: np.ndarray, grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Hits and correct hits at every grid threshold (hit iff distance <= t); O(n log n)."""
    order = np.argsort(dist, kind="stable")
    d_sorted = dist[order]
    cum = np.concatenate([[0], np.cumsum(correct[order].astype(np.int64))])
    hits = np.searchsorted(d_sorted, grid, side="right")
    return hits.astype(np.int64), cum[hits]


def metrics_table(
    dist: np.ndarray, correct: np.ndarray, positive: np.ndarray, grid: np.ndarray,
    confidence: float, bound: str,
) -> dict[str, np.ndarray]:
    """Column arrays over the grid: hits, correct, false hits, rates and the bound."""
    n = len(dist)
    hits, corr = sweep_counts(dist, correct, grid)
    false = hits - corr
    npos = int(positive.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(hits > 0, corr / np.maximum(hits, 1), np.nan)
    return {
        "threshold": grid, "hits": hits, "correct_hits": corr, "false_hits": false,
        "hit_rate": hits / max(n, 1), "correct_hit_rate": corr / max(n, 1),
        "false_hit_rate": false / max(n, 1), "precision": precision,
        "duplicate_recall": corr / npos if npos else np.full(len(grid), np.nan),
        "false_hit_upper_bound": upper_bound(false, np.full(len(grid), n), confidence, bound),
    }


def _row(table: dict[str, np.ndarray], i: int, n: int, npos: int) -> SplitMetrics:
    def opt(x: float) -> float | None:
        return None if not np.isfinite(x) else float(x)

    return SplitMetrics(
        threshold=float(table["threshold"][i]), probes=n, positive_probes=npos,
        hits=int(table["hits"][i]), correct_hits=int(table["correct_hits"][i]),
        false_hits=int(table["false_hits"][i]), hit_rate=float(table["hit_rate"][i]),
        correct_hit_rate=float(table["correct_hit_rate"][i]),
        false_hit_rate=float(table["false_hit_rate"][i]),
        precision=opt(table["precision"][i]), duplicate_recall=opt(table["duplicate_recall"][i]),
        false_hit_upper_bound=float(table["false_hit_upper_bound"][i]),
    )


@dataclass(frozen=True)
class SweepResult:
    """The choice and the curves (full-resolution column tables per split)."""

    threshold: Threshold | None
    tuning: SplitMetrics | None
    heldout: SplitMetrics | None
    tables: dict[str, dict[str, np.ndarray]]
    grid_step: float
    reason: str = ""


def choose_threshold(
    nn_dist: np.ndarray, correct: np.ndarray, design: ProbeDesign, spec: CacheTuneSpec
) -> SweepResult:
    """Sweep the grid on both splits; choose on tuning, report on held-out."""
    t = spec.tuning
    steps = round(t.max_threshold / t.grid_step)
    grid = np.round(np.arange(steps + 1) * t.grid_step, 10)
    tables, sizes = {}, {}
    for split, mask in (("tuning", ~design.heldout), ("heldout", design.heldout)):
        tables[split] = metrics_table(nn_dist[mask], correct[mask], design.positive[mask], grid,
                                      t.confidence, t.bound)
        sizes[split] = (int(mask.sum()), int(design.positive[mask].sum()))
    feasible = np.flatnonzero(tables["tuning"]["false_hit_upper_bound"] <= t.max_false_hit)
    if sizes["tuning"][0] == 0 or sizes["heldout"][0] == 0:
        raise DataError(f"cache tuning: a split has no probes (tuning {sizes['tuning'][0]}, "
                        f"held-out {sizes['heldout'][0]}); use more pairs")
    if feasible.size == 0:
        ub0 = float(tables["tuning"]["false_hit_upper_bound"][0])
        return SweepResult(None, None, None, tables, t.grid_step,
                           reason=f"no threshold meets the cap: even at 0 the {t.bound} bound "
                                  f"is {ub0:.4f} > {t.max_false_hit} (too few tuning probes?)")
    i = int(feasible.max())
    return SweepResult(
        Threshold.distance(float(grid[i])),
        _row(tables["tuning"], i, *sizes["tuning"]),
        _row(tables["heldout"], i, *sizes["heldout"]),
        tables, t.grid_step,
    )


def curve_rows(sweep: SweepResult, curve_step: float) -> list[dict[str, Any]]:
    """The reported curve: every ``curve_step`` (and the chosen threshold), both splits."""
    every = max(1, round(curve_step / sweep.grid_step))
    grid = sweep.tables["tuning"]["threshold"]
    idx = set(range(0, len(grid), every))
    if sweep.threshold is not None:
        idx.add(int(np.argmin(np.abs(grid - sweep.threshold.cosine_distance))))
    rows = []
    for i in sorted(idx):
        for split, table in sweep.tables.items():
            row: dict[str, Any] = {"threshold": float(grid[i]),
                                   "threshold_unit": "cosine_distance", "split": split}
            for k, col in table.items():
                if k == "threshold":
                    continue
                v = col[i]
                row[k] = None if isinstance(v, float | np.floating) and not np.isfinite(v) else (
                    int(v) if isinstance(v, np.integer) else float(v))
            rows.append(row)
    return rows


# --------------------------------------------------------------------------- Redis answers


def exclude_self(probes: np.ndarray, keys: np.ndarray, dists: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """First neighbour that is not the probe itself: (qid or -1, cosine distance or +inf)."""
    qids = np.vectorize(lambda k: -1 if k is None else int(str(k).rsplit(":", 1)[1]),
                        otypes=[np.int64])(keys)
    nn = np.full(len(probes), -1, dtype=np.int64)
    nd = np.full(len(probes), np.inf)
    for j in range(qids.shape[1] - 1, -1, -1):  # the leftmost non-self column wins
        ok = (qids[:, j] >= 0) & (qids[:, j] != probes)
        nn[ok], nd[ok] = qids[ok, j], dists[ok, j]
    return nn, nd


def knn_check(design: ProbeDesign, vectors: Any, nn: np.ndarray, nd: np.ndarray,
              sample: int = 500, seed: int = 0, block: int = 16384) -> dict[str, Any]:
    """Compare Redis's nearest (self excluded) with exact numpy search on a probe sample.

    ``vectors[qids]`` must return the rows of those question ids.
    """
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(design.probes), min(sample, len(design.probes)), replace=False)
    probes = design.probes[pick]
    q = vectors[probes]
    best_sim = np.full(len(pick), -np.inf)
    best_qid = np.full(len(pick), -1, dtype=np.int64)
    for start in range(0, len(design.stored), block):
        ids = design.stored[start: start + block]
        sims = q @ vectors[ids].T
        sims[ids[None, :] == probes[:, None]] = -np.inf
        j = np.argmax(sims, axis=1)
        s = sims[np.arange(len(pick)), j]
        better = s > best_sim
        best_sim[better], best_qid[better] = s[better], ids[j[better]]
    exact_d = 1.0 - best_sim
    return {
        "sample": len(pick),
        "same_nearest": float((best_qid == nn[pick]).mean()),
        "max_abs_distance_diff": float(np.max(np.abs(exact_d - nd[pick]))),
        "mean_distance_excess": float(np.mean(nd[pick] - exact_d)),
        "what": "Redis KNN (self excluded) vs exact numpy search on a probe sample",
    }


__all__ = [
    "ProbeDesign",
    "QQPLabels",
    "SplitMetrics",
    "SweepResult",
    "choose_threshold",
    "curve_rows",
    "design_probes",
    "exclude_self",
    "knn_check",
    "metrics_table",
    "qqp_labels",
    "sweep_counts",
]
