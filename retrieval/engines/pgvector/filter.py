"""pgvector filtered search: attributes as columns beside the vectors, filters as a WHERE clause.

Not a backend module (the backends are :mod:`retrieval.engines.pgvector.hnsw` and
:mod:`retrieval.engines.pgvector.ivfflat`, whose base mixes :class:`PgVectorFilter` in).

- **Columns.** ``attach_attributes(attrs)`` before ``build``: an integer attribute ``x`` becomes
  a ``bigint`` column ``"a_x"``, a label attribute a ``text[]`` column (the row's labels),
  written by the same binary ``COPY`` as the vectors. An attribute name must be a safe SQL
  identifier (letters, digits and ``_``, not starting with a digit, at most 61 characters;
  ConfigError otherwise); the column name is always double-quoted, so case is kept.
- **Predicates** (:class:`~retrieval.filtering.spec.Where`) render to SQL with the values as
  parameters (never interpolated): label ``eq`` / ``in`` -> ``"a_x" && %(f)s::text[]`` (the row
  has any of the labels); integer ``eq`` / ``in`` -> ``"a_x" = ANY(%(f)s::int8[])``; integer
  ``range [lo, hi]`` -> ``"a_x" BETWEEN %(lo)s AND %(hi)s`` (inclusive). The statement is
  ``SELECT id, dist FROM t WHERE <pred> ORDER BY embedding <op> q LIMIT k``, run as a
  server-side prepared statement (one per predicate shape), one execution per query.
- **Iterative scans.** For HNSW, ``hnsw.iterative_scan`` (search param ``iterative_scan``:
  off | relaxed_order | strict_order) and ``hnsw.max_scan_tuples`` apply: with ``off`` the scan
  returns at most ``ef_search`` candidates *before* the WHERE clause, so at low selectivity it
  finds fewer than k matches (recall collapses); with an iterative scan pgvector keeps walking
  the graph until k rows pass the filter or ``max_scan_tuples`` tuples were visited.
  ``relaxed_order`` rows may come out of order: they are sorted by distance here. IVFFlat has
  no iterative scan knob in rwb (``probes`` only): it returns the matches inside the probed
  lists. Fewer matches than k -> ``-1`` / ``+inf`` padded.
- **Plan.** No attribute index is created by default, so the planner's only index path for the
  ORDER BY is the vector index (sequential scans are off for the session): the filtered
  statement is EXPLAINed once per predicate shape and k after each search-param change, and a
  plan not scanning the vector index raises BackendError. With ``attribute_indexes=True``
  (constructor) a GIN index is built on each label column and a B-tree on each integer column;
  the planner may then legitimately answer a selective filter from them (bitmap scan + exact
  sort, i.e. a pre-filter): the chosen scan is recorded in :attr:`PgVectorFilter.filter_plans`
  and in ``BuildInfo.extra['filter_plans']`` instead of refused, and ``plan_cache_mode`` is
  ``force_custom_plan`` so each execution is planned for its own values, as EXPLAIN shows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval.errors import BackendError, ConfigError, DataError, param_error, unknown_name_error
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter
from retrieval.filtering.spec import Where
from retrieval.indexes.base import SearchResult

#: an attribute name usable as (part of) a SQL identifier: "a_" + name stays <= 63 bytes
SAFE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,60}")


def column(attr: str) -> str:
    """The quoted column of attribute ``attr`` (already checked by :func:`check_name`)."""
    return f'"a_{attr}"'


def check_name(name: str, where: str) -> None:
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: attribute name must be a safe SQL identifier (letters, digits and _, not "
            f"starting with a digit, at most 61 characters); received {name!r}")


def predicate(where: Where, kind: str) -> tuple[str, dict[str, Any]]:
    """(SQL condition with named placeholders, its parameters) of ``where`` on an attribute of
    ``kind`` (``int`` | ``label``)."""
    col = column(where.attr)
    if kind == "label":
        return f"{col} && %(f)s::text[]", {"f": [str(v) for v in where.values]}
    if where.range is not None:
        return (f"{col} BETWEEN %(lo)s AND %(hi)s",
                {"lo": int(where.range[0]), "hi": int(where.range[1])})
    return f"{col} = ANY(%(f)s::int8[])", {"f": [int(v) for v in where.values]}


class PgVectorFilter:
    """Mixin for :class:`retrieval.engines.pgvector.base.PgVectorIndex` (SupportsFilter)."""

    _fattrs: Attributes | None = None
    #: the attributes the current table holds (set by the build)
    _fbuilt: Attributes | None = None
    #: build GIN / B-tree indexes on the attribute columns (see the module docstring)
    attribute_indexes: bool = False
    #: (predicate shape, k) -> the scan EXPLAIN showed (cleared on every search-param change)
    _fplans: dict[tuple[str, int], str]
    table: str
    metric: Any
    _n: int
    _ids: np.ndarray | None
    _checked_k: int
    dim: int
    #: the indexed expression and the cast query parameter (PgVectorIndex._vexpr / _qexpr)
    _vexpr: Callable[[], str]
    _qexpr: Callable[[], str]

    @classmethod
    def check_filter(cls, where: Where, attrs: Attributes) -> None:
        """ConfigError (one line) for a label PostgreSQL text cannot hold (U+0000)."""
        bad = next((v for v in where.values if isinstance(v, str) and "\0" in v), None)
        if bad is not None and where.attr in attrs.labels:
            name = getattr(cls, "name", "pgvector")
            raise ConfigError(f"backend '{name}' cannot filter attribute '{where.attr}' on "
                              f"label {bad!r}: PostgreSQL text cannot hold U+0000")

    def attach_attributes(self, attrs: Attributes) -> None:
        """Store ``attrs`` as columns at the next build (names and labels checked now: text
        cannot hold U+0000)."""
        for name in attrs.names:
            check_name(name, self._where())  # type: ignore[attr-defined]
        for name, col in attrs.labels.items():
            bad = next((v for v in col.vocab if "\0" in v), None)
            if bad is not None:
                raise DataError(f"{self._where()}: attribute '{name}': labels must not hold "  # type: ignore[attr-defined]
                                f"U+0000 (PostgreSQL text cannot store it); received {bad!r}")
        self._fattrs = attrs

    # --- build hooks (called by PgVectorIndex._build) ---------------------------------------
    def _attr_columns(self) -> list[tuple[str, str]]:
        """(quoted column, SQL type) of each attached attribute, in COPY order."""
        a = self._fattrs
        if a is None:
            return []
        return ([(column(n), "int8") for n in a.ints]
                + [(column(n), "text[]") for n in a.labels])

    def _attr_values(self, n: int) -> list[list[Any]]:
        """One list per attribute column (as :meth:`_attr_columns`) of ``n`` values."""
        a = self._fattrs
        if a is None:
            return []
        if a.n != n:
            raise DataError(f"{self._where()}: attributes hold {a.n} rows for {n} vectors "  # type: ignore[attr-defined]
                            f"(one value per vector is required)")
        return ([a.ints[name].tolist() for name in a.ints]
                + [[col.row(j) for j in range(n)] for col in a.labels.values()])

    def _attr_indexes(self) -> list[str]:
        """CREATE INDEX statements for the attribute columns (only with attribute_indexes)."""
        a = self._fattrs
        if a is None or not self.attribute_indexes:
            return []
        out = []
        for i, name in enumerate(a.names):
            using = "gin" if a.kind(name) == "label" else "btree"
            out.append(f"CREATE INDEX {self.table}_a{i} ON {self.table} USING {using} "
                       f"({column(name)})")
        return out

    def _sample_filter_plans(self, x: np.ndarray) -> dict[str, str]:
        """The plan of one filter per attribute (its most common label / its median value),
        for ``BuildInfo.extra``."""
        a = self._fattrs
        if a is None:
            return {}
        for name in a.names:
            if a.kind(name) == "label":
                freqs = a.labels[name].frequencies()
                if freqs:
                    w = Where(attr=name, eq=max(freqs, key=lambda lab: freqs[lab]))
                    self._filtered_plan(w, "label", x[:1], 10)
            else:
                med = int(np.median(a.ints[name])) if a.n else 0
                self._filtered_plan(Where(attr=name, range=(med, med)), "int", x[:1], 10)
        return dict(self.filter_plans)

    # --- search -----------------------------------------------------------------------------
    @property
    def filter_plans(self) -> dict[str, str]:
        """Predicate shape (its SQL condition) -> the scan the planner chose (EXPLAIN)."""
        return {shape: plan for (shape, _k), plan in self._fplans.items()}

    def _filtered_sql(self, cond: str) -> str:
        from retrieval.engines.pgvector.params import OPERATOR

        v, q = self._vexpr(), self._qexpr()
        if v.startswith("(binary_quantize("):
            raise ConfigError("backend 'pgvector': field 'vector_type' must be vector or "
                              "halfvec for a filtered search (rwb has no filtered form of the "
                              "bit re-rank query); received bit")
        op = OPERATOR[self.metric]
        return (f"SELECT id, {v} {op} {q} FROM {self.table} WHERE {cond} "
                f"ORDER BY {v} {op} {q} LIMIT %(k)s")

    def _filtered_plan(self, where: Where, kind: str, query: np.ndarray, k: int) -> str:
        cond, params = predicate(where, kind)
        key = (cond, int(k))
        cache = self._fplans
        if key not in cache:
            sql = self._filtered_sql(cond)
            nodes = self._explain_nodes(sql, {**params, "q": np.ascontiguousarray(query[0]),  # type: ignore[attr-defined]
                                              "k": int(k)})
            index = f"{self.table}_idx"
            hit = next((n for n in nodes if n.get("Index Name") == index), None)
            if hit is not None:
                cache[key] = f"{hit['Node Type']} using {index}"
            else:
                other = next((n for n in nodes if str(n.get("Index Name", "")).startswith(
                    f"{self.table}_a")), None)
                kinds = ", ".join(n.get("Node Type", "?") for n in nodes)
                if other is None or not self.attribute_indexes:
                    raise BackendError(
                        f"{self._where()}: the planner does not use index {index} for the "  # type: ignore[attr-defined]
                        f"filtered search on '{where.attr}' (plan: {kinds}); measuring it "
                        f"would time a different scan")
                cache[key] = f"{other['Node Type']} using {other['Index Name']} ({kinds})"
        return cache[key]

    def _check_filter(self, where: Where) -> str:
        a = self._fbuilt
        if a is None:
            raise ConfigError(f"{self._where()}: filtered search needs attach_attributes() "  # type: ignore[attr-defined]
                              f"before build() (this table was built without attributes)")
        if where.attr not in a.names:
            raise unknown_name_error("attribute", where.attr, a.names, where=self._where())  # type: ignore[attr-defined]
        kind = a.kind(where.attr)
        if kind == "label" and where.range is not None:
            raise param_error(f"{where.attr}.range", f"eq or in (attribute '{where.attr}' "
                              f"holds labels)", list(where.range), where=self._where())  # type: ignore[attr-defined]
        if kind == "int" and any(isinstance(v, str) for v in where.values):
            raise param_error(where.attr, "integers for an integer attribute",
                              where.values, where=self._where())  # type: ignore[attr-defined]
        return kind

    def filtered_search(self, queries: np.ndarray, k: int, flt: RowFilter) -> SearchResult:
        """Top-``k`` among the rows matching ``flt.where``, answered by PostgreSQL (WHERE +
        ORDER BY on the vector index); ids as :meth:`search`, -1 padded when fewer are found."""
        import psycopg

        x = queries
        if not (k == self._checked_k and type(x) is np.ndarray and x.dtype == np.float32
                and x.ndim == 2 and x.shape[1] == self.dim and x.flags.c_contiguous):
            x = self._validated_queries(queries, k)  # type: ignore[attr-defined]
        if flt.mask.shape[0] != self._n:
            raise DataError(f"{self._where()}: filter mask has {flt.mask.shape[0]} rows for "  # type: ignore[attr-defined]
                            f"an index of {self._n} vectors")
        kind = self._check_filter(flt.where)
        self._filtered_plan(flt.where, kind, x[:1], k)
        cond, params = predicate(flt.where, kind)
        sql = self._filtered_sql(cond)
        cur = self.connect().cursor()  # type: ignore[attr-defined]
        raws = []
        try:
            for i in range(x.shape[0]):
                raws.append(cur.execute(sql, {**params, "q": x[i], "k": k},
                                        prepare=True).fetchall())
        except psycopg.Error as exc:
            raise self._fail("filtered search", exc) from None  # type: ignore[attr-defined]
        d, ids = _to_rows(raws, k, self.metric == "l2")
        if self._ids is not None:
            ids = np.where(ids >= 0, self._ids[np.maximum(ids, 0)], -1)
        return SearchResult(ids=ids, distances=d)


def _to_rows(raws: list[list[tuple[int, float]]], k: int,
             square: bool) -> tuple[np.ndarray, np.ndarray]:
    """Fetched (id, distance) rows per query -> (distances float32 ascending, ids int64),
    padded with inf / -1; Euclidean distances squared for rwb's l2."""
    nq = len(raws)
    ids = np.full((nq, k), -1, dtype=np.int64)
    d = np.full((nq, k), np.inf, dtype=np.float32)
    for r, raw in enumerate(raws):
        m = len(raw)
        if not m:
            continue
        got = np.asarray(raw, dtype=np.float64).reshape(m, 2)
        dist = got[:, 1] ** 2 if square else got[:, 1]
        order = np.argsort(dist, kind="stable")  # relaxed_order scans may come out of order
        ids[r, :m] = got[order, 0].astype(np.int64)
        d[r, :m] = dist[order]
    return d, ids
