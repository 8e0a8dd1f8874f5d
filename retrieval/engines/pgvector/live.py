"""Attach READ-ONLY to a user's pgvector table (a live collection, :mod:`retrieval.indexes.live`).

The ``live:`` keys (:class:`PgLiveSpec`): ``dsn`` (a libpq URL; its password never reaches any
output), ``table`` (``name`` or ``schema.name``), ``vector_column``, ``id_column`` (an integer
column: the collection's own ids), optional ``where`` (an SQL condition: a tenant), optional
``metric`` (``l2`` / ``cosine`` / ``ip``: checked against the index's operator class; needed
only for a table with no vector index).

Read-only by construction: the connection's session is ``SET SESSION CHARACTERISTICS AS
TRANSACTION READ ONLY`` and every statement runs in a transaction opened ``READ ONLY`` and rolled
back (nothing is ever committed); knobs are ``SET LOCAL`` inside it (``hnsw.ef_search``,
``hnsw.iterative_scan``, ``hnsw.max_scan_tuples``, ``ivfflat.probes``). A role with only
``SELECT`` on the table is enough; rwb never creates the ``vector`` extension here.

- describe: dimension from ``atttypmod``, metric from the index's operator class
  (``vector_l2_ops`` / ``vector_cosine_ops`` / ``vector_ip_ops``), index kind (``hnsw`` /
  ``ivfflat``) and its reloptions (``m`` / ``ef_construction`` / ``lists``, pgvector's defaults
  filled in), live rows (``count(*)`` with the ``where``), partitions as segments;
- search: ``ORDER BY vector_column <op> q LIMIT k`` with ``enable_seqscan = off`` (the planner
  would otherwise answer a small table exactly, silently; the plan is checked with EXPLAIN);
  distances in rwb's convention (:mod:`retrieval.data`: Euclidean squared for ``l2``);
- search_exact: the same statement with index scans and bitmap scans off (EXPLAIN checks that no
  index is used): the true top-k;
- iter_vectors: ``COPY (SELECT id, vec ... ORDER BY id OFFSET start) TO STDOUT (FORMAT BINARY)``.

Errors before any other work: a missing table, a wrong column, a non-vector / non-integer column,
a metric mismatch -> ConfigError (exit 2); a refused connection or credentials, no privilege to
read the table -> NotReachable (exit 3).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from retrieval.errors import BackendError, ConfigError, NotReachable, param_error
from retrieval.indexes.base import SearchResult
from retrieval.indexes.live import LiveDescription, LiveKnob
from retrieval.params import format_validation_error
from retrieval.redact import redact_error, redact_uri

log = logging.getLogger(__name__)

#: operator class -> rwb metric (halfvec expression indexes answer the same metrics)
OPCLASS_METRIC = {"vector_l2_ops": "l2", "vector_cosine_ops": "cosine", "vector_ip_ops": "ip",
                  "halfvec_l2_ops": "l2", "halfvec_cosine_ops": "cosine",
                  "halfvec_ip_ops": "ip"}
OPERATOR = {"l2": "<->", "ip": "<#>", "cosine": "<=>"}
#: pgvector's defaults of the build reloptions
BUILD_DEFAULTS = {"hnsw": {"m": 16, "ef_construction": 64}, "ivfflat": {"lists": 100}}
INTEGER_TYPES = ("smallint", "integer", "bigint")
EF_SEARCH_MAX = 1000
#: rwb's search param names -> pgvector's settings
NATIVE = {"ef_search": "hnsw.ef_search", "iterative_scan": "hnsw.iterative_scan",
          "max_scan_tuples": "hnsw.max_scan_tuples", "probes": "ivfflat.probes"}
ITERATIVE = ("off", "relaxed_order", "strict_order")


class PgLiveSpec(BaseModel):
    """The ``live:`` section of a pgvector collection (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["pgvector"] = "pgvector"
    dsn: str = Field(min_length=1, description="libpq URL (postgresql://user:pw@host:port/db)")
    table: str = Field(min_length=1, description="table, or schema.table (names as stored: "
                                                 "case-sensitive)")
    vector_column: str = Field(min_length=1)
    id_column: str = Field(min_length=1)
    where: str | None = Field(None, description="SQL condition selecting a tenant's rows")
    metric: Literal["l2", "cosine", "ip"] | None = None
    connect_timeout_s: float = Field(5.0, gt=0, le=300)

    @field_validator("where")
    @classmethod
    def _one_condition(cls, v: str | None) -> str | None:
        if v is not None and (";" in v or "--" in v or "/*" in v):
            raise ValueError("one SQL condition (no ';', no comments)")
        return v


def _ident(name: str) -> Any:
    from psycopg import sql

    return sql.Identifier(*name.split(".", 1)) if "." in name else sql.Identifier(name)


class PgLiveCollection:
    """A read-only handle on a pgvector table; see the module docstring."""

    engine = "pgvector"

    def __init__(self, spec: PgLiveSpec, where: str | None = None) -> None:
        self.spec = spec
        self._where = where or "live"
        self._conn: Any = None
        self._params: dict[str, Any] = {}
        self._plan_checked: set[tuple[bool, int]] = set()
        self._connect()
        self._desc = self._inspect()

    # --- connection ---------------------------------------------------------------------------
    @property
    def server(self) -> str:
        """The server, safe to show (no password)."""
        return redact_uri(self.spec.dsn)

    def _line(self, exc: BaseException) -> str:
        return redact_error(exc, self.spec.dsn)[:300]

    def _connect(self) -> None:
        import psycopg

        try:
            conn = psycopg.connect(self.spec.dsn, autocommit=True,
                                   connect_timeout=max(1, round(self.spec.connect_timeout_s)))
        except psycopg.Error as exc:
            raise NotReachable(
                f"{self._where}: live.dsn: cannot connect to PostgreSQL at {self.server}: "
                f"{type(exc).__name__}: {self._line(exc)}") from None
        try:
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            conn.execute("SET default_transaction_read_only = on")
            conn.read_only = True
            conn.autocommit = False
            has = conn.execute("SELECT 1 FROM pg_type WHERE typname = 'vector'").fetchone()
            conn.rollback()
            if has is None:
                raise ConfigError(f"{self._where}: live.dsn: the database at {self.server} has "
                                  f"no pgvector extension (type 'vector' not found)")
            from pgvector.psycopg import register_vector

            register_vector(conn)
            conn.rollback()
        except psycopg.Error as exc:
            conn.close()
            raise NotReachable(f"{self._where}: PostgreSQL at {self.server}: "
                               f"{type(exc).__name__}: {self._line(exc)}") from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _run(self, what: str, query: Any, params: Any = None, *,
             settings: tuple[str, ...] = ()) -> list[Any]:
        """``query`` in its own READ ONLY transaction (rolled back), after ``SET LOCAL``
        ``settings``; all rows."""
        import psycopg

        conn = self._conn
        if conn is None:
            raise BackendError(f"{self._where}: the live collection is closed")
        try:
            with conn.cursor() as cur:
                for line in settings:
                    cur.execute(line)
                cur.execute(query, params)
                rows = cur.fetchall() if cur.description is not None else []
            return rows
        except psycopg.errors.InsufficientPrivilege as exc:
            raise NotReachable(f"{self._where}: {what} refused on PostgreSQL at {self.server}: "
                               f"{self._line(exc)}") from None
        except psycopg.OperationalError as exc:
            raise NotReachable(f"{self._where}: {what} failed, PostgreSQL at {self.server} is "
                               f"not reachable: {self._line(exc)}") from None
        except psycopg.Error as exc:
            raise BackendError(f"{self._where}: {what} failed on PostgreSQL at {self.server}: "
                               f"{type(exc).__name__}: {self._line(exc)}") from None
        finally:
            if not conn.closed:
                conn.rollback()

    # --- describe -----------------------------------------------------------------------------
    def _inspect(self) -> LiveDescription:
        s = self.spec
        quoted = _ident(s.table).as_string(self._conn)  # as stored: case-sensitive, as queried
        found = self._run("describe", "SELECT to_regclass(%s)::oid, "
                          "(SELECT relkind FROM pg_class WHERE oid = to_regclass(%s))",
                          (quoted, quoted))
        oid, relkind = found[0]
        if oid is None:
            raise ConfigError(f"{self._where}: field 'live.table' must name an existing table "
                              f"on {self.server}; received {s.table!r} (not found)")
        cols = {r[0]: (r[1], r[2], r[3]) for r in self._run(
            "describe", "SELECT attname, format_type(atttypid, atttypmod), atttypmod, attnum "
            "FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
            (oid,))}
        for field, col in (("vector_column", s.vector_column), ("id_column", s.id_column)):
            if col not in cols:
                raise param_error(f"live.{field}", f"a column of {s.table} "
                                  f"({', '.join(sorted(cols))})", col, where=self._where)
        vtype, typmod, attnum = cols[s.vector_column]
        if not vtype.startswith("vector"):
            raise param_error("live.vector_column", "a column of type vector(n)",
                              f"{s.vector_column} {vtype}", where=self._where)
        if cols[s.id_column][0] not in INTEGER_TYPES:
            raise param_error("live.id_column", "an integer column (smallint, integer, bigint)",
                              f"{s.id_column} {cols[s.id_column][0]}", where=self._where)
        dim = int(typmod)
        if dim <= 0:  # vector without a declared dimension: read it from a row
            got = self._run("describe", self._sql("SELECT vector_dims({v}) FROM {t}{w} LIMIT 1",
                                                  params=False))
            dim = int(got[0][0]) if got else 0
        index = self._vector_index(oid, int(attnum))
        kind = index["kind"] if index else None
        metric = index["metric"] if index else None
        if s.metric is not None and metric is not None and s.metric != metric:
            raise param_error("live.metric", f"'{metric}' (the operator class "
                              f"{index['opclass'] if index else ''} of index "
                              f"{index['name'] if index else ''})", s.metric, where=self._where)
        metric = metric or s.metric
        if metric is None:
            raise param_error("live.metric", "one of 'l2', 'cosine', 'ip' (the table has no "
                              "hnsw / ivfflat index on the column to read it from)", None,
                              where=self._where)
        rows = int(self._run("count", self._sql("SELECT count(*) FROM {t}{w}",
                                                params=False))[0][0])
        parts = int(self._run("describe", "SELECT count(*) FROM pg_inherits WHERE inhparent = "
                              "%s", (oid,))[0][0])
        version = self._run("describe", "SELECT current_setting('server_version'), (SELECT "
                            "extversion FROM pg_extension WHERE extname = 'vector')")[0]
        details: dict[str, Any] = {"server": self.server, "server_version": version[0],
                                   "pgvector_version": version[1], "relkind": relkind,
                                   "where": s.where, "native_names": dict(NATIVE)}
        if index:
            details.update(index_name=index["name"], opclass=index["opclass"],
                           index_definition=index["definition"])
        return LiveDescription(
            engine="pgvector", name=s.table, dim=dim, metric=metric, index_kind=kind,
            build_params=dict(index["build"]) if index else {}, rows=rows,
            segments=parts if relkind == "p" or parts else None, details=details)

    def _vector_index(self, oid: int, attnum: int) -> dict[str, Any] | None:
        rows = self._run(
            "describe",
            "SELECT i.relname, am.amname, opc.opcname, i.reloptions, pg_get_indexdef(i.oid) "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_am am ON am.oid = i.relam JOIN pg_opclass opc ON opc.oid = x.indclass[0] "
            "WHERE x.indrelid = %s AND am.amname IN ('hnsw', 'ivfflat') AND x.indkey[0] = %s "
            "ORDER BY am.amname, i.relname", (oid, attnum))
        for name, am, opc, relopts, definition in rows:
            if opc not in OPCLASS_METRIC:
                continue
            build: dict[str, Any] = dict(BUILD_DEFAULTS[am])
            for opt in relopts or []:
                key, _, value = str(opt).partition("=")
                build[key] = int(value) if value.isdigit() else value
            return {"name": name, "kind": am, "opclass": opc, "metric": OPCLASS_METRIC[opc],
                    "build": build, "definition": definition}
        return None

    def _sql(self, template: str, *, params: bool = True) -> Any:
        """``template`` with ``{t}`` the table, ``{v}`` / ``{i}`` the columns, ``{w}`` the tenant
        condition (`` WHERE (...)`` or nothing; its ``%`` doubled in a statement that takes
        parameters)."""
        from psycopg import sql

        s = self.spec
        cond = (s.where or "").replace("%", "%%") if params else (s.where or "")
        w = sql.SQL(" WHERE ({})").format(sql.SQL(cond)) if s.where else sql.SQL("")
        return sql.SQL(template).format(t=_ident(s.table), v=sql.Identifier(s.vector_column),
                                        i=sql.Identifier(s.id_column), w=w)

    # --- the contract -------------------------------------------------------------------------
    def describe(self) -> LiveDescription:
        return self._desc

    def knobs(self) -> tuple[LiveKnob, ...]:
        d = self._desc
        if d.index_kind == "hnsw":
            return (LiveKnob("ef_search", "hnsw.ef_search", 1, EF_SEARCH_MAX, default=40),)
        if d.index_kind == "ivfflat":
            return (LiveKnob("probes", "ivfflat.probes", 1, int(d.build_params["lists"]),
                             default=1),)
        return ()

    def set_search_params(self, **params: Any) -> None:
        allowed = {"hnsw": ("ef_search", "iterative_scan", "max_scan_tuples"),
                   "ivfflat": ("probes",)}.get(self._desc.index_kind or "", ())
        for key, value in params.items():
            if key not in allowed:
                raise param_error("search", f"one of {', '.join(allowed) or '(none: no index)'}"
                                  f" for a {self._desc.index_kind} index", key,
                                  where=self._where)
            if key == "iterative_scan":
                if value not in ITERATIVE:
                    raise param_error("iterative_scan", ", ".join(ITERATIVE), value,
                                      where=self._where)
                continue
            high = {"ef_search": EF_SEARCH_MAX, "max_scan_tuples": 2**31 - 1}.get(
                key, int(self._desc.build_params.get("lists", 1)))
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or \
                    not 1 <= int(value) <= high:
                raise param_error(key, f"an integer in [1, {high}]", value, where=self._where)
        self._params = dict(params)
        self._plan_checked.clear()

    def _settings(self, exact: bool) -> tuple[str, ...]:
        if exact:
            return ("SET LOCAL enable_indexscan = off", "SET LOCAL enable_bitmapscan = off",
                    "SET LOCAL enable_indexonlyscan = off")
        lines = ["SET LOCAL enable_seqscan = off"]
        for key, value in self._params.items():
            text = str(value) if key == "iterative_scan" else str(int(value))
            lines.append(f"SET LOCAL {NATIVE[key]} = {text}")
        return tuple(lines)

    def _search_sql(self) -> Any:
        op = OPERATOR[self._desc.metric]
        return self._sql("SELECT {i}, {v} " + op + " %(q)s FROM {t}{w} ORDER BY {v} " + op +
                         " %(q)s LIMIT %(k)s")

    def _check_plan(self, exact: bool, k: int) -> None:
        if (exact, k) in self._plan_checked:
            return
        from psycopg import sql

        q = np.full(self._desc.dim, 0.5, dtype=np.float32)
        raw = self._run("EXPLAIN", sql.SQL("EXPLAIN (FORMAT JSON) {}").format(self._search_sql()),
                        {"q": q, "k": k}, settings=self._settings(exact))[0][0]
        doc = raw if not isinstance(raw, str) else json.loads(raw)
        nodes = list(_plan_nodes(doc[0]["Plan"]))
        index = self._desc.details.get("index_name")
        used = [n for n in nodes if n.get("Index Name")]
        if exact and used:
            raise BackendError(f"{self._where}: the exact search still uses index "
                               f"{used[0]['Index Name']} with index scans off; not exact")
        if not exact and index and not any(n.get("Index Name") == index for n in used):
            kinds = ", ".join(n.get("Node Type", "?") for n in nodes)
            raise BackendError(f"{self._where}: the planner does not use index {index} for the "
                               f"search (plan: {kinds}); measuring it would time an exact scan")
        self._plan_checked.add((exact, k))

    def _query(self, queries: np.ndarray, k: int, exact: bool) -> SearchResult:
        x = np.ascontiguousarray(queries, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self._desc.dim:
            raise param_error("queries", f"a (n, {self._desc.dim}) matrix (the dimension of "
                              f"{self.spec.vector_column})", tuple(x.shape), where=self._where)
        self._check_plan(exact, k)
        stmt, settings = self._search_sql(), self._settings(exact)
        square = self._desc.metric == "l2"
        ids = np.full((x.shape[0], k), -1, dtype=np.int64)
        dist = np.full((x.shape[0], k), np.inf, dtype=np.float32)
        for r in range(x.shape[0]):
            got = self._run("search", stmt, {"q": x[r], "k": int(k)}, settings=settings)
            if not got:
                continue
            arr = np.asarray(got, dtype=np.float64).reshape(len(got), 2)
            d = arr[:, 1] ** 2 if square else arr[:, 1]
            order = np.argsort(d, kind="stable")  # relaxed_order scans may come out of order
            ids[r, :len(got)] = arr[order, 0].astype(np.int64)
            dist[r, :len(got)] = d[order]
        return SearchResult(ids=ids, distances=dist)

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """The index's answer with the current knobs (one read-only transaction a query)."""
        return self._query(queries, k, exact=False)

    def search_exact(self, queries: np.ndarray, k: int) -> SearchResult:
        """The true top-k: index scans off inside the read-only transaction (checked with
        EXPLAIN)."""
        return self._query(queries, k, exact=True)

    def iter_vectors(self, batch: int = 10_000, start: int = 0
                     ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids int64, vectors float32) batches by binary COPY, ordered by id, from row
        ``start`` of that order; throughput logged (rows/s)."""
        import psycopg

        conn, dim = self._conn, self._desc.dim
        stmt = self._sql("COPY (SELECT {i}::int8, {v} FROM {t}{w} ORDER BY {i} OFFSET "
                         + str(int(start)) + ") TO STDOUT (FORMAT BINARY)", params=False)
        t0, n = time.perf_counter(), 0
        ids: list[int] = []
        vecs: list[np.ndarray] = []
        try:
            with conn.cursor() as cur, cur.copy(stmt) as copy:
                copy.set_types(["int8", "vector"])
                for row in copy.rows():
                    ids.append(int(row[0]))
                    vecs.append(_as_array(row[1]))
                    if len(ids) >= batch:
                        n += len(ids)
                        yield (np.asarray(ids, dtype=np.int64),
                               np.asarray(vecs, dtype=np.float32).reshape(-1, dim))
                        ids, vecs = [], []
            if ids:
                n += len(ids)
                yield (np.asarray(ids, dtype=np.int64),
                       np.asarray(vecs, dtype=np.float32).reshape(-1, dim))
        except psycopg.OperationalError as exc:
            raise NotReachable(f"{self._where}: snapshot failed, PostgreSQL at {self.server} is "
                               f"not reachable: {self._line(exc)}") from None
        except psycopg.Error as exc:
            raise BackendError(f"{self._where}: snapshot (COPY) failed on PostgreSQL at "
                               f"{self.server}: {self._line(exc)}") from None
        finally:
            if not conn.closed:
                conn.rollback()
        took = time.perf_counter() - t0
        log.info("snapshot of %s: %d rows in %.2f s (%.0f rows/s)", self.spec.table, n, took,
                 n / took if took > 0 else 0.0)

    def close(self) -> None:
        """Close the connection (nothing else: the table is the user's)."""
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def __repr__(self) -> str:
        return f"PgLiveCollection({self.spec.table!r} at {self.server})"


def _as_array(v: Any) -> np.ndarray:
    """A COPY row's vector (pgvector's ``Vector`` or an array) as float32."""
    from pgvector import Vector

    return np.asarray(v.to_numpy() if isinstance(v, Vector) else v, dtype=np.float32)


def _plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []) or []:
        yield from _plan_nodes(child)


def attach(section: Mapping[str, Any], where: str | None = None) -> PgLiveCollection:
    """The engine descriptor's ``attach`` hook: validate ``section`` (:class:`PgLiveSpec`),
    connect read-only, read the description (errors before any other work)."""
    from pydantic import ValidationError

    src = where or "live"
    try:
        spec = PgLiveSpec.model_validate(dict(section))
    except ValidationError as exc:
        err = format_validation_error(exc, PgLiveSpec, where=src, prefix="live.")
        raise ConfigError(redact_error(str(err), str(section.get("dsn") or ""))) from None
    return PgLiveCollection(spec, src)


__all__ = ["PgLiveCollection", "PgLiveSpec", "attach"]
