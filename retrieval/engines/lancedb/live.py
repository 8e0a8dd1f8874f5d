"""Attach read-only to a user's LanceDB table (``live: {engine: lancedb, uri, table,
vector_column, id_column}``; :mod:`retrieval.indexes.live`).

Read-only: the table is opened with ``lancedb.connect(uri).open_table(table)`` and only read
(schema, ``list_indices``, ``index_stats``, ``stats``, ``count_rows``, searches, scans); rwb
never calls ``add`` / ``delete`` / ``optimize`` / ``create_index`` / ``cleanup_old_versions`` on
it. A local ``uri`` that is not an existing folder is refused (``lancedb.connect`` would create
it).

Description: the dimension from the schema (a fixed-size list of floats), the index of the
vector column from ``list_indices`` / ``index_stats`` (type, distance type, indexed and unindexed
rows; ``index_details`` as build params: LanceDB 0.40 does not report ``num_partitions`` of an
IVF index, so the ``nprobes`` range is ``[1, 4096]`` and LanceDB caps it at the partitions),
rows from ``count_rows``, fragments (``stats().fragment_stats``) as segments.

Knobs: ``nprobes`` and ``refine_factor`` (IVF_PQ, IVF_HNSW_SQ, IVF_FLAT, ...), ``ef`` for the
HNSW kinds (searched with ``max(ef, k * refine_factor)``: LanceDB refuses a smaller ef). Every
query carries the index's distance type (another one makes LanceDB scan every row).
Distances: LanceDB ``l2`` (squared) and ``cosine`` (``1 - cos``) as rwb's; ``dot``
(``1 - <x, q>``) becomes ``-<x, q>``.

Exact: the same query with ``bypass_vector_index()`` (a flat scan by LanceDB). Snapshot: a
plain scan of ``(id_column, vector_column)`` in LanceDB's row order, ``offset`` for a resume.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import BackendError, ConfigError, NotReachable, param_error
from retrieval.indexes.base import SearchResult
from retrieval.indexes.live import LiveDescription, LiveKnob
from retrieval.indexes.live_util import (
    LiveSection,
    check_expected,
    check_k,
    check_queries,
    check_search_params,
    label,
    one_line,
    parse_section,
)
from retrieval.redact import redact_uri

log = logging.getLogger(__name__)

#: LanceDB distance type -> rwb metric
METRIC = {"l2": "l2", "cosine": "cosine", "dot": "ip"}
NPROBES_MAX = 4096
REFINE_MAX = 64
EF_MAX = 4096


class LanceLive(LiveSection):
    """``live:`` keys of a LanceDB table: ``uri`` (a folder or an object-store URI),
    ``table``, ``vector_column``, ``id_column`` (int64, default ``id``)."""

    uri: str
    table: str
    vector_column: str
    id_column: str = "id"


def _is_local(uri: str) -> bool:
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", uri) is None or uri.startswith("file://")


def _table_names(db: Any) -> list[str]:
    listed = db.list_tables()
    return [str(t) for t in getattr(listed, "tables", listed)]


class LanceLiveCollection:
    """A read-only handle on a LanceDB table (see the module docstring)."""

    def __init__(self, spec: LanceLive, where: str | None) -> None:
        self.spec, self.where = spec, label(where, "lancedb")
        self._params: dict[str, int] = {}
        self._table = self._open(spec, where)
        self._dim, self._distance, self._index = self._inspect(spec, where)
        self.metric = METRIC.get(self._distance, "l2")
        check_expected(spec, self._dim, self.metric, spec.table, where)

    # --- attach -----------------------------------------------------------------------------
    def _open(self, spec: LanceLive, where: str | None) -> Any:
        import lancedb

        if _is_local(spec.uri) and not Path(spec.uri.removeprefix("file://")).is_dir():
            raise NotReachable(f"{self.where}: no LanceDB database folder at "
                               f"{redact_uri(spec.uri)!r} (live.uri); rwb does not create one")
        try:
            db = lancedb.connect(spec.uri)
            names = _table_names(db)
        except Exception as exc:
            raise NotReachable(f"{self.where}: cannot open LanceDB at live.uri: "
                               f"{one_line(exc)}") from None
        try:
            return db.open_table(spec.table)
        except Exception:
            raise param_error("live.table", f"a table of {redact_uri(spec.uri)!r} "
                              f"({', '.join(sorted(names)) or 'none'})", spec.table,
                              where=where) from None

    def _inspect(self, spec: LanceLive, where: str | None) -> tuple[int, str, Any]:
        import pyarrow as pa

        schema = self._table.schema
        names = schema.names
        for key, col in (("live.vector_column", spec.vector_column),
                         ("live.id_column", spec.id_column)):
            if col not in names:
                raise param_error(key, f"a column of table '{spec.table}' ({', '.join(names)})",
                                  col, where=where)
        vtype = schema.field(spec.vector_column).type
        if not (pa.types.is_fixed_size_list(vtype) and pa.types.is_floating(vtype.value_type)):
            raise param_error("live.vector_column", "a fixed-size list of floats (a vector "
                              "column)", f"{spec.vector_column} ({vtype})", where=where)
        itype = schema.field(spec.id_column).type
        if not pa.types.is_integer(itype):
            raise param_error("live.id_column", "an integer column (rwb needs int64 ids)",
                              f"{spec.id_column} ({itype})", where=where)
        index = None
        for cfg in self._table.list_indices():
            if list(cfg.columns) == [spec.vector_column] and "Vector" in str(cfg.type_url):
                index = cfg
        distance = "l2"
        if index is not None:
            stats = self._table.index_stats(index.name)
            distance = str(getattr(stats, "distance_type", "l2") or "l2")
            index = (index, stats)
        return int(vtype.list_size), distance, index

    # --- LiveCollection ---------------------------------------------------------------------
    def describe(self) -> LiveDescription:
        """The table as LanceDB reports it (see the module docstring)."""
        stats = self._table.stats()
        frags = stats.get("fragment_stats", {}).get("num_fragments") if isinstance(
            stats, Mapping) else None
        details: dict[str, Any] = {"uri": redact_uri(self.spec.uri),
                                   "version": int(self._table.version),
                                   "distance_type": self._distance}
        kind, build = None, {}
        if self._index is not None:
            cfg, ist = self._index
            kind = str(ist.index_type)
            build = {k: v for k, v in dict(cfg.index_details or {}).items()
                     if k != "runtime_hints"}
            details.update(index_name=cfg.name, indexed_rows=int(ist.num_indexed_rows),
                           unindexed_rows=int(ist.num_unindexed_rows))
        return LiveDescription(engine="lancedb", name=self.spec.table, dim=self._dim,
                               metric=self.metric, index_kind=kind, build_params=build,
                               rows=int(self._table.count_rows()),
                               segments=int(frags) if frags is not None else None,
                               details=details)

    def knobs(self) -> tuple[LiveKnob, ...]:
        """``nprobes`` / ``refine_factor`` for an IVF index, ``ef`` too for an HNSW one."""
        if self._index is None:
            return ()
        kind = str(self._index[1].index_type).upper()
        out = []
        if "HNSW" in kind:
            out.append(LiveKnob("ef", "ef", 1, EF_MAX, None))
        if "IVF" in kind:
            out.append(LiveKnob("nprobes", "nprobes", 1, NPROBES_MAX, 20))
        out.append(LiveKnob("refine_factor", "refine_factor", 1, REFINE_MAX, None))
        return tuple(out)

    def set_search_params(self, **params: Any) -> None:
        """Set knobs (names from :meth:`knobs`); an unknown or out-of-range one: ConfigError."""
        self._params.update(check_search_params(self.knobs(), params, self.where))

    def _query(self, q: np.ndarray, k: int, exact: bool) -> Any:
        cols = [self.spec.id_column, "_distance"]
        query = (self._table.search(q, vector_column_name=self.spec.vector_column)
                 .distance_type(self._distance).limit(k).select(cols))
        if exact:
            return query.bypass_vector_index()
        p = self._params
        if "nprobes" in p:
            query = query.nprobes(p["nprobes"])
        if "refine_factor" in p:
            query = query.refine_factor(p["refine_factor"])
        if "ef" in p:
            query = query.ef(max(p["ef"], k * p.get("refine_factor", 1)))
        return query

    def _run(self, queries: np.ndarray, k: int, exact: bool) -> SearchResult:
        k = check_k(k, self.where)
        x = check_queries(queries, self._dim, self.where)
        try:
            raw = self._query(x[0] if len(x) == 1 else x, k, exact).to_arrow()
        except Exception as exc:
            raise BackendError(f"{self.where}: LanceDB search failed: {one_line(exc)}") from None
        return self._rows(raw, len(x), k)

    def _rows(self, raw: Any, nq: int, k: int) -> SearchResult:
        ids = np.full((nq, k), -1, dtype=np.int64)
        d = np.full((nq, k), np.inf, dtype=np.float32)
        if raw.num_rows:
            got_i = raw.column(self.spec.id_column).to_numpy().astype(np.int64)
            got_d = raw.column("_distance").to_numpy().astype(np.float64)
            if self.metric == "ip":
                got_d = got_d - 1.0
            qi = (raw.column("query_index").to_numpy() if "query_index" in raw.column_names
                  else np.zeros(len(got_i), dtype=np.int64))
            order = np.lexsort((got_i, got_d, qi))
            qi, got_i, got_d = qi[order], got_i[order], got_d[order]
            pos = np.arange(len(qi)) - np.searchsorted(qi, np.arange(nq))[qi]
            keep = pos < k
            ids[qi[keep], pos[keep]] = got_i[keep]
            d[qi[keep], pos[keep]] = got_d[keep]
        return SearchResult(ids=ids, distances=d)

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k through the table's vector index with the current knobs."""
        return self._run(queries, k, exact=False)

    def search_exact(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k by LanceDB's own flat scan (``bypass_vector_index``)."""
        return self._run(queries, k, exact=True)

    def iter_vectors(self, batch: int = 10_000, start: int = 0
                     ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(ids int64, vectors float32)`` batches of a plain scan, from row ``start``."""
        if batch < 1 or start < 0:
            raise ConfigError(f"{self.where}: iter_vectors needs batch >= 1 and start >= 0; "
                              f"received batch={batch}, start={start}")
        cols = [self.spec.id_column, self.spec.vector_column]
        scan = self._table.search().select(cols).offset(start).limit(None)
        for rb in scan.to_batches(batch):
            ids = rb.column(self.spec.id_column).to_numpy().astype(np.int64)
            flat = rb.column(self.spec.vector_column).flatten().to_numpy(zero_copy_only=False)
            yield ids, np.asarray(flat, dtype=np.float32).reshape(len(ids), self._dim)

    def close(self) -> None:
        """Drop the table handle (nothing to write)."""
        self._table = None


def attach(section: Mapping[str, Any], where: str | None = None) -> LanceLiveCollection:
    """The engine descriptor's ``attach`` hook for LanceDB."""
    return LanceLiveCollection(parse_section(LanceLive, section, where), where)


__all__ = ["LanceLive", "LanceLiveCollection", "attach"]
