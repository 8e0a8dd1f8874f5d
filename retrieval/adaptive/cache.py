"""Per-entry semantic-cache thresholds (vCache-style), judged against the global threshold under
the same false-hit upper bound (pure numpy; cosine distances, hit iff distance <= threshold).

vCache gives every cached entry its own threshold. Offline, most entries are the nearest of one
probe or none, so a threshold per entry would only memorise the tuning probes; here an entry's
threshold is a function of the entry: its ``feature`` (by default its distance to its own
nearest other cached entry: a crowded neighbourhood asks for a stricter threshold), binned by
quantiles over the tuning probes' nearest entries, one threshold per bin.

The thresholds are chosen on the tuning probes under the global rule's own constraint: the
one-sided upper confidence bound on the tuning false-hit rate (false hits / all tuning probes)
<= ``max_false_hit``. Within it, the bin thresholds maximise tuning hits (greedy on the convex
hull: the jump with the most hits per false hit first; never fewer tuning hits than the global
threshold, which is one of the candidates). Both are then measured on the held-out probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.stats.binomial import upper_bound

POLICY = "per_entry_threshold"
COST_UNIT = "misses per probe (1 - hit rate)"


def max_false_hits(n: int, cap: float, confidence: float, bound: str) -> int:
    """The most false hits among ``n`` probes whose upper bound stays <= ``cap`` (-1: none)."""
    ub = upper_bound(np.arange(n + 1), np.full(n + 1, n), confidence, bound)
    ok = np.flatnonzero(ub <= cap)
    return int(ok.max()) if ok.size else -1


def neighbourhood(probes: np.ndarray, nn: np.ndarray, entries: np.ndarray,
                  nbr_qids: np.ndarray, nbr_dists: np.ndarray) -> np.ndarray:
    """The entry feature per probe: the cosine distance from the probe's nearest entry ``nn``
    to that entry's own nearest other entry, the probe itself left out (as it is from its own
    lookup). ``entries``: the sorted distinct nearest entries; ``nbr_qids`` / ``nbr_dists``:
    their k >= 3 nearest cached entries (-1 / inf: none). NaN where there is none."""
    out = np.full(nn.size, np.nan)
    rows = np.flatnonzero(nn >= 0)
    at = np.searchsorted(entries, nn[rows])
    for j in range(nbr_qids.shape[1] - 1, -1, -1):  # the leftmost column that is neither wins
        col = nbr_qids[at, j]
        ok = (col >= 0) & (col != nn[rows]) & (col != probes[rows])
        out[rows[ok]] = nbr_dists[at[ok], j]
    return np.where(np.isfinite(out), out, np.nan)


def _counts(dist: np.ndarray, correct: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.argsort(dist, kind="stable")
    cum = np.concatenate([[0], np.cumsum(correct[order].astype(np.int64))])
    hits = np.searchsorted(dist[order], grid, side="right").astype(np.int64)
    return hits, hits - cum[hits]


@dataclass(frozen=True)
class EntryThresholds:
    """Bin edges of the entry feature (ascending) and one threshold (cosine distance) per bin
    (an entry with no feature, NaN, takes the last bin's)."""

    edges: tuple[float, ...]
    thresholds: tuple[float, ...]

    def of(self, feature: np.ndarray) -> np.ndarray:
        f = np.where(np.isfinite(feature), feature, np.inf)
        idx = np.searchsorted(np.asarray(self.edges, dtype=np.float64), f, side="right")
        return np.asarray(self.thresholds, dtype=np.float64)[idx]


def fit_entry_thresholds(dist: np.ndarray, correct: np.ndarray, feature: np.ndarray,
                         grid: np.ndarray, budget: int, bins: int,
                         global_t: float | None) -> EntryThresholds:
    """Per-bin thresholds from the grid with at most ``budget`` false hits over these (tuning)
    probes in total, maximising hits (see the module doc)."""
    f = np.where(np.isfinite(feature), feature, np.inf)
    finite = f[np.isfinite(f)]
    qs = (np.quantile(finite, np.arange(1, bins) / bins) if bins > 1 and finite.size
          else np.zeros(0))
    edges = tuple(float(e) for e in np.unique(qs))
    which = np.searchsorted(np.asarray(edges, dtype=np.float64), f, side="right")
    per_bin = [_counts(dist[which == b], correct[which == b], grid)
               for b in range(len(edges) + 1)]
    at = [0] * len(per_bin)
    spent = sum(int(fh[0]) for _, fh in per_bin)
    while True:
        best = None
        for b, (h, fh) in enumerate(per_bin):
            dh, df = h[at[b] + 1:] - h[at[b]], fh[at[b] + 1:] - fh[at[b]]
            ok = np.flatnonzero((dh > 0) & (spent + df <= budget))
            if not ok.size:
                continue
            value = dh[ok] / np.maximum(df[ok], 1e-9)
            pos = int(np.lexsort((-dh[ok], -value))[0])  # best ratio, then most hits
            j = int(ok[pos])
            if best is None or value[pos] > best[0]:
                best = (float(value[pos]), b, at[b] + 1 + j, int(df[j]))
        if best is None:
            break
        _, b, i, df_b = best
        at[b], spent = i, spent + df_b
    fitted = EntryThresholds(edges, tuple(float(grid[i]) for i in at))
    if global_t is not None:
        same = EntryThresholds(edges, (global_t,) * len(at))
        if hits_of(same, dist, f) > hits_of(fitted, dist, f):
            return same
    return fitted


def hits_of(t: EntryThresholds, dist: np.ndarray, feature: np.ndarray) -> int:
    return int((dist <= t.of(feature)).sum())


def outcome(hit: np.ndarray, correct: np.ndarray, confidence: float,
            bound: str) -> dict[str, Any]:
    """Hit rate, false-hit rate and its upper bound of a set of probes (per probe)."""
    n = int(hit.size)
    false = int((hit & ~correct).sum())
    return {"probes": n, "hits": int(hit.sum()), "false_hits": false,
            "hit_rate": float(hit.mean()) if n else 0.0,
            "false_hit_rate": false / n if n else 0.0,
            "false_hit_upper_bound": float(upper_bound(false, n, confidence, bound))}


def by_bin(t: EntryThresholds, feature: np.ndarray, dist: np.ndarray, correct: np.ndarray,
           global_t: float) -> list[dict[str, Any]]:
    """Per bin of the entry feature (the policy's own bins): probes, the per-entry threshold and
    both rules' hit and false-hit rates over these probes (the tail a single rate hides)."""
    f = np.where(np.isfinite(feature), feature, np.inf)
    which = np.searchsorted(np.asarray(t.edges, dtype=np.float64), f, side="right")
    out = []
    for b, thr in enumerate(t.thresholds):
        m = which == b
        n = int(m.sum())
        row: dict[str, Any] = {"bin": b, "threshold": thr, "probes": n}
        for name, cut in (("", thr), ("fixed_", global_t)):
            hit = dist[m] <= cut
            row[f"{name}hit_rate"] = float(hit.mean()) if n else None
            row[f"{name}false_hit_rate"] = float((hit & ~correct[m]).mean()) if n else None
        out.append(row)
    return out


def _worst(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r[key] is not None]
    return max(vals) if vals else None


def judge_entries(dist: np.ndarray, correct: np.ndarray, feature: np.ndarray,
                  heldout: np.ndarray, grid: np.ndarray, global_t: float | None, *,
                  max_false_hit: float, confidence: float, bound: str,
                  bins: int = 4) -> dict[str, Any]:
    """The per-entry policy fitted on the tuning probes (``~heldout``) under the global rule's
    bound, and the ``adaptive`` entry comparing it with the global threshold on the held-out
    probes (``cost``: miss rate; ``mean``: false-hit rate; ``p5``: None, a per-probe outcome is
    0 or 1, see docs/adaptive.md; the tail is ``detail.by_bin`` and
    ``detail.worst_bin_false_hit_rate``; ``vs_fixed.ratio``: per-entry miss rate / global miss
    rate)."""
    tune = ~heldout
    budget = max_false_hits(int(tune.sum()), max_false_hit, confidence, bound)
    base = {"policy": POLICY, "cost_unit": COST_UNIT, "p5": None}
    if budget < 0 or global_t is None:
        return {**base, "skipped": "no threshold meets the false-hit cap on the tuning probes"}
    t = fit_entry_thresholds(dist[tune], correct[tune], feature[tune], grid, budget, bins,
                             global_t)
    sides = {}
    for name, thr in (("policy", t.of(feature)), ("fixed", np.full(dist.size, global_t))):
        sides[name] = {split: outcome(dist[m] <= thr[m], correct[m], confidence, bound)
                       for split, m in (("tuning", tune), ("heldout", heldout))}
    p, g = sides["policy"]["heldout"], sides["fixed"]["heldout"]
    bins_out = by_bin(t, feature[heldout], dist[heldout], correct[heldout], global_t)
    ratio = (1 - p["hit_rate"]) / (1 - g["hit_rate"]) if g["hit_rate"] < 1 else None
    wins = p["hit_rate"] > g["hit_rate"] and p["false_hit_rate"] <= max_false_hit
    head = "per-entry thresholds win" if wins else "the tuned global threshold wins"
    verdict = (f"{head}: held-out hit rate {p['hit_rate']:.4f} per-entry vs "
               f"{g['hit_rate']:.4f} global (threshold {global_t:g}), false-hit rate "
               f"{p['false_hit_rate']:.4f} vs {g['false_hit_rate']:.4f} (upper bounds "
               f"{p['false_hit_upper_bound']:.4f} vs {g['false_hit_upper_bound']:.4f}; both "
               f"chosen with a tuning upper bound <= {max_false_hit})")
    return {**base, "cost": 1 - p["hit_rate"], "mean": p["false_hit_rate"],
            "n_queries": p["probes"],
            "detail": {"edges": list(t.edges), "thresholds": list(t.thresholds),
                       "threshold_unit": "cosine_distance", "false_hit_budget": budget,
                       "tuning": sides["policy"]["tuning"], "heldout": p,
                       "fixed_tuning": sides["fixed"]["tuning"], "fixed_heldout": g,
                       "by_bin": bins_out,
                       "worst_bin_false_hit_rate": _worst(bins_out, "false_hit_rate"),
                       "fixed_worst_bin_false_hit_rate": _worst(bins_out,
                                                                "fixed_false_hit_rate")},
            "vs_fixed": {"knob": "threshold (cosine distance)", "value": global_t,
                         "cost": 1 - g["hit_rate"], "mean": g["false_hit_rate"], "p5": None,
                         "ratio": ratio, "winner": "policy" if wins else "fixed",
                         "verdict": verdict}}
