"""``tune.query_subset``: the knob search on a compressed query subset (WAter-style).

The first search step of each build runs on every tuning query; its per-query recall is each
query's difficulty at that probe. The subset keeps ``share`` of the tuning queries chosen to
preserve that distribution: the queries are ordered by their recall (ties in a seeded random
order) and taken at evenly spaced ranks (systematic stratified sampling), so every stratum of
difficulty keeps its share. The following steps of the search run on the subset only. The
chosen knob is then re-measured on EVERY tuning query (its lower bound, as without a subset):
when it misses there, the knob is raised (x1.25 steps, at most 8) until it meets; the value
just below it is measured on every tuning query too, and the answer is reported changed when
that one would meet (a search on every query would have stopped lower) or the knob was
raised. The held-out check is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: fewest queries a subset keeps (a lower bound over fewer is too loose to search on)
MIN_QUERIES = 50
#: most x1.25 raises of the knob when the subset's answer misses on every query
MAX_RAISES = 8


def stratified_subset(tune: np.ndarray, per_query_recall: np.ndarray, share: float,
                      seed: int) -> np.ndarray:
    """Row numbers (sorted) of ``max(ceil(share * n), min(n, MIN_QUERIES))`` of the tuning
    queries ``tune`` (row numbers aligned with ``per_query_recall``, 0..1 each), taken at
    evenly spaced ranks of their recall so the subset's recall distribution matches."""
    n = int(tune.size)
    keep = min(n, max(math.ceil(share * n), min(n, MIN_QUERIES)))
    if keep >= n:
        return np.sort(tune)
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(n), np.asarray(per_query_recall, dtype=np.float64)))
    ranks = np.floor((np.arange(keep) + 0.5) * n / keep).astype(np.int64)
    return np.sort(tune[order[ranks]])


def next_up(value: int, high: int) -> int:
    """The next knob value of a x1.25 raise (at least +1, at most ``high``)."""
    return min(high, max(value + 1, round(value * 1.25)))


def subset_doc(share: float, subset_size: int, n_tune: int, points: Sequence[Any],
               on_subset: int, knob: int, lower_meets: bool | None,
               extra_evals: int) -> dict[str, Any]:
    """The unit's ``query_subset`` note: ``queries`` (subset size) of ``of`` tuning queries,
    ``query_evals`` (query searches the knob search ran) vs ``query_evals_all`` (had every step
    run on every tuning query), ``confirm_query_evals`` (the re-measures on every query),
    ``knob_on_subset`` (the subset's answer), ``knob`` (after the check), ``answer_changed``."""
    evals = sum(int(p.n_queries) for p in points)
    return {
        "share": share, "queries": subset_size, "of": n_tune,
        "query_evals": evals, "query_evals_all": len(points) * n_tune,
        "confirm_query_evals": extra_evals,
        "knob_on_subset": on_subset, "knob": knob, "lower_meets_on_all": lower_meets,
        "answer_changed": knob != on_subset or bool(lower_meets),
    }


def subset_summary(builds: Sequence[Mapping[str, Any]], share: float) -> dict[str, Any]:
    """The summary's ``query_subset``: per-unit notes added up; ``saved`` is the share of
    query searches saved (1 - (knob search + checks) / every step on every query)."""
    notes = [b["note"]["query_subset"] for b in builds
             if isinstance(b.get("note"), Mapping) and "query_subset" in b["note"]]
    evals = sum(int(n["query_evals"]) + int(n["confirm_query_evals"]) for n in notes)
    full = sum(int(n["query_evals_all"]) for n in notes)
    return {
        "share": share, "units": len(notes),
        "answers_changed": sum(1 for n in notes if n["answer_changed"]),
        "query_evals": evals, "query_evals_all": full,
        "saved": None if not full else 1.0 - evals / full,
        "rule": "knob search on a recall-stratified subset (first step on every tuning "
                "query); chosen knob re-measured on every tuning query; answer_changed when "
                "the knob had to rise or the value below it meets on every query",
    }


__all__ = ["next_up", "stratified_subset", "subset_doc", "subset_summary"]
