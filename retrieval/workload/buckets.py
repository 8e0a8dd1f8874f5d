"""Per-query filters grouped in selectivity buckets, bound to a dataset's attributes.

A :class:`Bucket` is one selectivity target (or one fixed filter): every query has one filter in
it (``of_query`` indexes the bucket's distinct filters), and each filter's measured selectivity
(matching rows / base rows) is recorded. Each filter is a
:class:`~retrieval.filtering.rows.RowFilter`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from retrieval.errors import ConfigError, unknown_name_error
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter, bind
from retrieval.filtering.spec import FilterSpec, Where


@dataclass(frozen=True, eq=False)
class Bucket:
    """One selectivity bucket: ``filters`` (distinct) and ``of_query`` (int64 (nq,)) naming
    each query's filter. ``target`` is the target selectivity (None for a fixed filter)."""

    name: str
    target: float | None
    filters: tuple[RowFilter, ...]
    of_query: np.ndarray

    def filter_for(self, q: int) -> RowFilter:
        return self.filters[int(self.of_query[q])]

    @cached_property
    def per_query_selectivity(self) -> np.ndarray:
        sel = np.asarray([f.selectivity for f in self.filters], dtype=np.float64)
        return sel[self.of_query]

    @property
    def selectivity(self) -> float:
        """Mean measured selectivity over the queries (0..1)."""
        return float(self.per_query_selectivity.mean())

    @cached_property
    def digest(self) -> str:
        """sha256 (16 hex) of which rows each query's filter matches (the ground-truth key)."""
        h = hashlib.sha256(self.of_query.astype(np.int64).tobytes())
        for f in self.filters:
            h.update(f.bitmap.tobytes())
        return h.hexdigest()[:16]

    def groups(self, queries: np.ndarray | None = None) -> list[tuple[RowFilter, np.ndarray]]:
        """(filter, positions in ``queries`` (default all) using it), for batched calls."""
        qs = np.arange(self.of_query.shape[0]) if queries is None else np.asarray(queries)
        which = self.of_query[qs]
        return [(self.filters[i], np.flatnonzero(which == i)) for i in np.unique(which)]

    def describe(self) -> dict[str, Any]:
        sel = self.per_query_selectivity
        return {
            "bucket": self.name,
            "target_selectivity": self.target,
            "selectivity": float(sel.mean()),
            "selectivity_min": float(sel.min()),
            "selectivity_max": float(sel.max()),
            "distinct_filters": len(self.filters),
            "filter": self.filters[int(self.of_query[0])].where.describe()
            if len(self.filters) == 1 else f"per query, e.g. "
            f"{self.filters[int(self.of_query[0])].where.describe()}",
        }


def bind_workload(spec: FilterSpec, attrs: Attributes | None, n_queries: int, *,
                  nearest: np.ndarray | None = None, seed: int = 0,
                  where: str = "filters") -> list[Bucket]:
    """The buckets of ``spec`` on ``attrs``; ``nearest`` (int64 (nq,)) is each query's exact
    unfiltered nearest row (needed for ``place: near``)."""
    if attrs is None:
        raise ConfigError(f"{where}: the dataset has no attributes, so it cannot be filtered "
                          f"(use a dataset with attributes: synthetic with attributes: true, "
                          f"a text collection with attribute fields, or an attributes file)")
    buckets = []
    for i, nf in enumerate(spec.fixed):
        rf = bind(nf.where, attrs, label=f"{where}.fixed[{i}] '{nf.name}'")
        buckets.append(Bucket(nf.name, None, (rf,), np.zeros(n_queries, dtype=np.int64)))
    if spec.selectivities:
        assert spec.attribute is not None
        if spec.attribute not in attrs.names:
            raise unknown_name_error("attribute", spec.attribute, attrs.names,
                                     where=f"{where}.attribute")
        if spec.place == "near" and nearest is None:
            raise ConfigError(f"{where}.place: 'near' needs each query's nearest neighbour")
        rng = np.random.default_rng(seed)
        for s in spec.selectivities:
            wheres = (_int_windows if attrs.kind(spec.attribute) == "int" else _label_picks)(
                attrs, spec.attribute, s, n_queries, spec.place, nearest, rng)
            distinct = list(dict.fromkeys(wheres))
            pos = {w: j for j, w in enumerate(distinct)}
            label = f"{where}.selectivities {s:g}"
            filters = tuple(bind(w, attrs, label=label) for w in distinct)
            of_query = np.asarray([pos[w] for w in wheres], dtype=np.int64)
            buckets.append(Bucket(f"sel={s:g}", s, filters, of_query))
    return buckets


def _int_windows(attrs: Attributes, name: str, s: float, nq: int, place: str,
                 nearest: np.ndarray | None, rng: np.random.Generator) -> list[Where]:
    """Per query, a range over ``round(s * n)`` consecutive sorted values."""
    col = attrs.ints[name]
    order = np.sort(col)
    n = order.shape[0]
    width = max(1, round(s * n))
    if place == "near":
        assert nearest is not None
        pos = np.searchsorted(order, col[nearest])
        start = np.clip(pos - width // 2, 0, n - width)
    else:
        start = rng.integers(0, n - width + 1, size=nq)
    return [Where(attr=name, range=(int(order[a]), int(order[a + width - 1]))) for a in start]


def _label_picks(attrs: Attributes, name: str, s: float, nq: int, place: str,
                 nearest: np.ndarray | None, rng: np.random.Generator) -> list[Where]:
    """Per query, one label whose frequency is within a factor 2 of ``s`` (else the nearest)."""
    col = attrs.labels[name]
    freqs = {k: v for k, v in col.frequencies().items() if v > 0}
    if not freqs:
        raise ConfigError(f"filters.attribute: label attribute '{name}' has no labels")
    cands = sorted(k for k, f in freqs.items() if s / 2 <= f <= 2 * s)
    if not cands:
        cands = [min(freqs, key=lambda k: abs(np.log(freqs[k] / s)))]
    out = []
    for q in range(nq):
        pool = cands
        if place == "near" and nearest is not None:
            own = [x for x in col.row(int(nearest[q])) if x in cands]
            pool = own or cands
        out.append(Where(attr=name, eq=pool[int(rng.integers(len(pool)))]))
    return out
