"""The conformance kit: what a case is (:class:`ConformanceCase`), what a run reports, the exact
neighbours every check compares with (Faiss ``IndexFlat``, rwb distance convention), and the
small assertion helpers the checks share."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import Metric, VectorDataset, normalize_rows
from retrieval.indexes.base import SearchResult

#: every check, in the order ``run_all`` runs them
CHECKS: tuple[str, ...] = (
    "declaration",
    "search_before_build",
    "shapes_ids_distances",
    "recall_at_most_accurate",
    "monotone_knobs",
    "unknown_params_rejected",
    "invalid_combinations_rejected",
    "bad_inputs_rejected",
    "k_larger_than_n",
    "custom_ids",
    "deterministic_build",
    "memory_report",
    "snapshot_round_trip",
    "close_idempotent",
    "writes",
)


@dataclass(frozen=True, eq=False)
class ConformanceCase:
    """One backend configuration to check.

    ``build``: build params (dict, validated by the backend); ``index_kwargs``: extra keyword
    arguments for :func:`retrieval.indexes.create_index` (e.g. ``threads``); ``workdir``: parent
    folder for the indexes (each index gets a fresh sub-folder; a temporary folder when None).
    ``min_recall``: recall@k required at ``most_accurate_search``; ``exact_distances``: whether
    returned distances must equal the true metric distances (False for lossy codes without
    refine); ``monotone_tolerance``: allowed recall drop between consecutive knob values;
    ``knobs_with_effect``: knobs whose smallest value must give a lower recall than their largest
    (catches a silent brute-force fallback; default: the first monotone knob).
    """

    backend: str
    metric: Metric = "l2"
    build: Mapping[str, Any] = field(default_factory=dict)
    k: int = 10
    min_recall: float = 0.99
    exact_distances: bool = True
    monotone_tolerance: float = 0.01
    knobs_with_effect: tuple[str, ...] | None = None
    index_kwargs: Mapping[str, Any] = field(default_factory=dict)
    workdir: Path | None = None
    n: int = 3000
    dim: int = 32
    n_queries: int = 100
    cluster_spread: float = 3.0
    seed: int = 0
    skip: frozenset[str] = frozenset()
    label: str = ""

    @property
    def id(self) -> str:
        """Short id for test names, e.g. ``hnswlib-l2``."""
        return self.label or f"{self.backend}-{self.metric}"


def engine_cases() -> dict[str, list[ConformanceCase]]:
    """The conformance cases the engines declare (their descriptors' ``conformance``), by
    backend name; a backend without any is checked with :class:`ConformanceCase` defaults."""
    from retrieval.indexes.engine import all_engines

    out: dict[str, list[ConformanceCase]] = {}
    for desc in all_engines().values():
        for kwargs in desc.conformance:
            case = ConformanceCase(**kwargs)
            out.setdefault(case.backend, []).append(case)
    return out


class CheckNotApplicable(Exception):
    """A check that does not apply to the backend (e.g. no snapshot format): it checked nothing,
    so it is neither passed nor failed. pytest callers turn it into a skip with this reason."""


@dataclass(frozen=True)
class ConformanceReport:
    """What each check measured (recalls, knob curves, sizes), by check name; the checks that
    did not apply to the backend are in ``not_applicable`` (name -> reason), not in ``results``."""

    case_id: str
    results: dict[str, dict[str, Any]]
    not_applicable: dict[str, str] = field(default_factory=dict)


def recall(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Mean id-intersection recall@k (ids -1 never count)."""
    hits = 0
    for row, true in zip(found[:, :k], exact[:, :k]):
        hits += len(set(row[row >= 0].tolist()) & set(true.tolist()))
    return hits / (k * exact.shape[0])


def exact_neighbours(ds: VectorDataset, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k (ids int64, rwb distances float32) by Faiss IndexFlat."""
    import faiss

    base, queries = ds.base, ds.queries
    if ds.metric == "cosine":
        base, queries = normalize_rows(base), normalize_rows(queries)
    index = faiss.IndexFlatL2(ds.dim) if ds.metric == "l2" else faiss.IndexFlatIP(ds.dim)
    index.add(base)
    d, i = index.search(queries, k)
    if ds.metric == "ip":
        d = -d
    elif ds.metric == "cosine":
        d = 1.0 - d
    return i.astype(np.int64), d.astype(np.float32)


def true_distances(ds: VectorDataset, ids: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """rwb distances (float64) between each query and the base rows ``ids`` (ids >= 0)."""
    base = ds.base.astype(np.float64)
    q = queries.astype(np.float64)
    if ds.metric == "cosine":
        base = base / np.linalg.norm(base, axis=1, keepdims=True)
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
    x = base[np.maximum(ids, 0)]  # (nq, k, dim)
    if ds.metric == "l2":
        return np.asarray(((x - q[:, None, :]) ** 2).sum(-1))
    ip = np.einsum("qkd,qd->qk", x, q)
    return np.asarray(-ip if ds.metric == "ip" else 1.0 - ip)


def exact_live(vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, metric: Metric,
               k: int) -> np.ndarray:
    """Exact top-k caller ids of ``queries`` among ``vectors`` labelled ``ids`` (numpy,
    float64, rwb distance convention, ties by smaller id): the truth over a live set."""
    x, q = vectors.astype(np.float64), queries.astype(np.float64)
    if metric == "cosine":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
    if metric == "l2":
        d = (q * q).sum(1)[:, None] - 2.0 * q @ x.T + (x * x).sum(1)[None, :]
    else:
        d = -(q @ x.T) if metric == "ip" else 1.0 - q @ x.T
    order = np.lexsort((np.broadcast_to(ids, d.shape), d), axis=1)[:, :k]
    return np.asarray(ids)[order]


def misspelling(name: str, known: list[str]) -> str | None:
    """A misspelling of ``name`` whose closest known name is ``name`` (None if none found)."""
    for cand in (name + "x", name[:-1], name[1:], name.replace("_", "")):
        if cand and cand not in known:
            close = difflib.get_close_matches(cand, known, n=1, cutoff=0.5)
            if close and close[0] == name:
                return cand
    return None


def knob_grid(lo: int, hi: int, max_points: int = 8) -> list[int]:
    """Roughly geometric integer grid from lo to hi inclusive."""
    if hi <= lo:
        return [lo]
    vals = np.unique(np.round(np.geomspace(lo, hi, num=max_points)).astype(int))
    return [int(v) for v in vals]


class Expect:
    """``with Expect((ConfigError,), "what", must_mention="x") as e: ...`` asserts the block
    raises one of the kinds (mentioning a word); the message is kept in ``e.message``."""

    def __init__(self, kinds: tuple[type[BaseException], ...], what: str,
                 must_mention: str | None = None) -> None:
        self.kinds, self.what, self.must_mention = kinds, what, must_mention
        self.message = ""

    def __enter__(self) -> Expect:
        return self

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> bool:
        names = "/".join(k.__name__ for k in self.kinds)
        if exc is None:
            raise AssertionError(f"{self.what}: expected {names}, no error")
        if not isinstance(exc, self.kinds):
            raise AssertionError(
                f"{self.what}: expected {names}, got {type(exc).__name__}: {exc}"
            ) from exc
        self.message = str(exc)
        if self.must_mention is not None:
            assert self.must_mention in self.message, (
                f"{self.what}: error does not name '{self.must_mention}': {self.message}"
            )
        return True


def check_rows(res: SearchResult, n: int) -> None:
    """ids in [0, n) or -1; -1 exactly where distance is inf and only at the end of a row;
    no id twice in a row; finite distances ascending."""
    ids, d = res.ids, res.distances
    assert ((ids >= 0) & (ids < n) | (ids == -1)).all(), "ids outside [0, n) and not -1"
    missing = ids == -1
    assert (np.isinf(d) == missing).all(), "distance must be +inf exactly where the id is -1"
    assert (np.diff(missing.astype(np.int8), axis=1) >= 0).all(), "-1 ids must come last"
    for row_ids, row_d in zip(ids, d):
        valid = row_ids >= 0
        assert len(np.unique(row_ids[valid])) == int(valid.sum()), "an id appears twice in a row"
        dv = row_d[valid].astype(np.float64)
        assert (np.diff(dv) >= -1e-6 * (1.0 + np.abs(dv[1:]))).all(), "distances not ascending"


__all__ = [
    "CHECKS",
    "ConformanceCase",
    "ConformanceReport",
    "Expect",
    "check_rows",
    "exact_live",
    "exact_neighbours",
    "knob_grid",
    "misspelling",
    "recall",
    "true_distances",
]
