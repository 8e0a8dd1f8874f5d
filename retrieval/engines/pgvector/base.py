"""What the two pgvector backends share: connection, bulk load, timed index build, the plan
check, prepared-statement search and the size report. Not a backend: no ``register`` here.

Where it connects: ``url=`` given to the constructor in code, else ``$RWB_PG_URL`` (e.g.
``postgresql://postgres@127.0.0.1:5432/postgres``, what ``python -m
retrieval.engines.pgvector.server start`` prints); credentials come from that URL or libpq's own
environment (``PGPASSWORD``), never from a spec, and every message shows the URL without them.

One index = one table ``rwb_<hex>`` (``id int8, embedding vector(dim)``) on its own connection
(autocommit, so ``SET`` lines hold for the session), dropped by :meth:`close`. Build: binary
``COPY`` (``copy_s``), then ``CREATE INDEX`` timed alone (``index_s``) with
``maintenance_work_mem`` and ``max_parallel_maintenance_workers = threads - 1`` (both read back
with ``SHOW`` and recorded in ``BuildInfo.extra``, with any NOTICE the build raised, e.g. a graph
that outgrew maintenance_work_mem), then ``ANALYZE``. ``enable_seqscan`` is off for the
session (the planner would otherwise answer a large ef_search on a small table with an exact
sequential scan). Before any measurement the plan is checked
with ``EXPLAIN``: a plan that does not scan this index (a sequential scan is exact, silently)
raises BackendError. Search: one server-side prepared statement, executed once per query (a batch
is a loop of them), vector parameter in binary. Filtered search (attributes as columns, a WHERE
clause, iterative scans): :mod:`retrieval.engines.pgvector.filter`.

Writes (:class:`~retrieval.indexes.base.SupportsWrites`): the ``id`` column holds slots (row
numbers at build, then new numbers; the caller's ids are mapped in rwb); an insert is one
``INSERT`` of the batch (the index is updated by PostgreSQL), a delete ``DELETE ... WHERE id =
ANY(...)`` (the heap rows become dead tuples that HNSW scans still visit until ``VACUUM``:
pgvector #244), ``maintain`` is ``VACUUM`` of the table (timed); ``dead_fraction`` is
``n_dead_tup / (n_live_tup + n_dead_tup)`` from ``pg_stat_user_tables`` (server statistics:
they can lag a write by up to a second).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retrieval.data import Metric
from retrieval.engines.pgvector.cold import PgColdMixin
from retrieval.engines.pgvector.filter import PgVectorFilter, _to_rows
from retrieval.engines.pgvector.lost import connection_lost
from retrieval.engines.pgvector.owned import pg_mark, pg_unlock
from retrieval.engines.pgvector.params import (
    OPERATOR,
    OPS,
    check_dim,
    opclass,
    query_expr,
    rerank_sql,
    vector_expr,
)
from retrieval.engines.pgvector.segments import PgSegments, tree_sql
from retrieval.errors import BackendError, ConfigError, NotReachable
from retrieval.indexes.inprocess import InProcessIndex
from retrieval.indexes.registry import package_version
from retrieval.indexes.writes import SlotWrites
from retrieval.params import Params
from retrieval.redact import redact_error, redact_uri

log = logging.getLogger(__name__)

URL_ENV = "RWB_PG_URL"
#: maintenance_work_mem for CREATE INDEX unless $RWB_PG_MAINTENANCE_WORK_MEM says otherwise
MAINTENANCE_WORK_MEM = os.environ.get("RWB_PG_MAINTENANCE_WORK_MEM", "512MB")


def resolve_url(url: str | None, where: str) -> str:
    """``url`` or ``$RWB_PG_URL``; ConfigError (one line) when neither is set."""
    target = url or os.environ.get(URL_ENV) or ""
    if not target:
        raise NotReachable(
            f"{where}: no PostgreSQL to connect to: set {URL_ENV} (for a local one: "
            f"python -m retrieval.services.pg_server start --dir DIR prints it)"
        )
    return target


def first_line(exc: BaseException, *urls: str | None) -> str:
    """The first line of ``exc``, safe to show (the passwords of ``urls`` removed too)."""
    return redact_error(exc, *urls, os.environ.get(URL_ENV))[:300]


class PgVectorIndex(SlotWrites, PgSegments, PgColdMixin, PgVectorFilter, InProcessIndex):
    """Base of ``pgvector`` (HNSW) and ``pgvector-ivfflat``: see the module docstring.
    Subclasses set ``method`` and implement :meth:`_with_clause`, :meth:`_set_lines`."""

    requires = ("psycopg", "pgvector")
    export_engine = "pgvector"
    #: pgvector draws HNSW levels and IVFFlat k-means seeds from the server's own random state
    deterministic = False
    #: index access method: "hnsw" | "ivfflat"
    method: ClassVar[str]

    def __init__(
        self,
        dim: int,
        metric: Metric,
        build: Params | None = None,
        *,
        seed: int = 0,
        threads: int = 1,
        workdir: Path | None = None,
        url: str | None = None,
        maintenance_work_mem: str | None = None,
        connect_timeout_s: float = 5.0,
        attribute_indexes: bool = False,
    ) -> None:
        super().__init__(dim, metric, build, seed=seed, threads=threads, workdir=workdir)
        self._url_arg = url
        self.maintenance_work_mem = maintenance_work_mem or MAINTENANCE_WORK_MEM
        self.connect_timeout_s = float(connect_timeout_s)
        self.table = f"rwb_{uuid.uuid4().hex[:12]}"
        self._conn: Any = None
        self._sql = ""
        self._plan_ok_k = -1
        self.attribute_indexes = bool(attribute_indexes)
        self._fplans = {}
        #: sessions of other threads' hot-path calls: a pool of idle cursors (as many sessions
        #: as calls ran at once), closed with the index or when the search params change
        self._thread_conns: list[Any] = []
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        #: searching a table another process built (attach): never dropped here
        self._attached = False
        #: this instance created self.table (only then is it dropped here)
        self._owned = False

    # --- class hooks ------------------------------------------------------------------------
    @classmethod
    def library_version(cls) -> str:
        import pgvector  # noqa: F401
        import psycopg  # noqa: F401

        return (f"psycopg {package_version('psycopg')}; "
                f"pgvector-python {package_version('pgvector')}")

    @classmethod
    def check_build_params(cls, build: Params, dim: int) -> None:
        check_dim(dim, f"backend '{cls.name}'")

    def _with_clause(self) -> str:
        raise NotImplementedError

    def _vtype(self) -> str:
        """``vector`` or ``halfvec`` (the build's ``vector_type``; IVFFlat: vector)."""
        return str(self.build_params.model_dump().get("vector_type", "vector"))

    def _vexpr(self) -> str:
        return vector_expr(self._vtype(), self.dim)

    def _qexpr(self) -> str:
        return query_expr(self._vtype(), self.dim, "%(q)b")

    def _set_lines(self) -> list[str]:
        """The ``SET`` statements of the current search params (values validated ints/enums)."""
        raise NotImplementedError

    # --- connection -------------------------------------------------------------------------
    @property
    def where(self) -> str:
        """The server, safe to log (no credentials)."""
        target = self._url_arg or os.environ.get(URL_ENV) or "(no RWB_PG_URL)"
        return redact_uri(target)

    def _fail(self, what: str, exc: BaseException) -> BackendError:
        """The one-line error of a failed call: NotReachable (exit 3) when the connection was
        lost during the call (the server killed or gone), else BackendError (exit 2)."""
        if connection_lost(exc, self._conn):
            return NotReachable(
                f"{self._where()}: {what} failed, PostgreSQL at {self.where} is not reachable "
                f"(connection lost): {type(exc).__name__}: {first_line(exc)}"
            )
        return BackendError(
            f"{self._where()}: {what} failed on PostgreSQL at {self.where}: "
            f"{type(exc).__name__}: {first_line(exc)}"
        )

    def connect(self) -> Any:
        """Open the connection (idempotent): psycopg, autocommit, pgvector types registered."""
        self._check_open()
        if self._conn is not None and not self._conn.closed:
            return self._conn
        self._conn = self._open_connection()
        return self._conn

    def _open_connection(self) -> Any:
        import psycopg
        from pgvector.psycopg import register_vector

        url = resolve_url(self._url_arg, self._where())
        try:
            conn = psycopg.connect(url, autocommit=True,
                                   connect_timeout=max(1, round(self.connect_timeout_s)))
        except psycopg.Error as exc:
            raise NotReachable(
                f"{self._where()}: cannot connect to PostgreSQL at {redact_uri(url)}: "
                f"{type(exc).__name__}: {first_line(exc, url)}"
            ) from None
        try:
            has = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
            if has is None:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
        except psycopg.Error as exc:
            conn.close()
            raise BackendError(
                f"{self._where()}: PostgreSQL at {redact_uri(url)} has no usable pgvector "
                f"extension ({type(exc).__name__}: {first_line(exc)}); CREATE EXTENSION vector "
                f"needs the extension installed and the privilege to create it"
            ) from None
        return conn

    def _run(self, what: str, sql: str, params: Any = None) -> Any:
        import psycopg

        try:
            return self.connect().execute(sql, params)
        except psycopg.Error as exc:
            raise self._fail(what, exc) from None

    def server_facts(self) -> dict[str, Any]:
        """Server and extension versions (for BuildInfo.extra and manifests)."""
        row = self._run("version", "SELECT current_setting('server_version'), "
                        "(SELECT extversion FROM pg_extension WHERE extname = 'vector')").fetchone()
        return {"server_version": row[0], "pgvector_version": row[1]}

    # --- build ------------------------------------------------------------------------------
    def _build(self, x: np.ndarray) -> dict[str, Any]:
        import time

        import psycopg

        conn = self.connect()
        self._plan_ok_k = -1
        if self._owned:  # this instance's previous build
            self._run("drop table", f"DROP TABLE IF EXISTS {self.table}")
            self._owned = False
        acols = self._attr_columns()
        avals = self._attr_values(x.shape[0])
        self._fplans, self._fbuilt = {}, self._fattrs
        self._run("create table",  # fails on an existing table: never adopted, never dropped
                  f"CREATE TABLE {self.table} (id int8 NOT NULL, embedding vector({self.dim})"
                  + "".join(f", {c} {t}" for c, t in acols) + ")" + self._partition_clause())
        self._owned = True
        self._create_partitions()
        try:
            pg_mark(conn, self.table)
        except psycopg.Error as exc:
            raise self._fail("COMMENT ON TABLE", exc) from None
        notices: list[str] = []
        def on_notice(diag: Any) -> None:
            notices.append(str(diag.message_primary))

        conn.add_notice_handler(on_notice)
        t0 = time.perf_counter_ns()
        try:
            with conn.cursor() as cur, cur.copy(
                f"COPY {self.table} (id, embedding{''.join(', ' + c for c, _ in acols)}) "
                f"FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["int8", "vector", *(t for _, t in acols)])
                if avals:
                    for i, vals in enumerate(zip(*avals)):
                        copy.write_row((i, x[i], *vals))
                else:
                    for i in range(x.shape[0]):
                        copy.write_row((i, x[i]))
        except psycopg.Error as exc:
            raise self._fail("COPY", exc) from None
        t1 = time.perf_counter_ns()
        workers = max(0, self.threads - 1)
        self._run("SET", f"SET maintenance_work_mem = '{_mem_literal(self.maintenance_work_mem)}'")
        self._run("SET", f"SET max_parallel_maintenance_workers = {int(workers)}")
        create = (f"CREATE INDEX {self.table}_idx ON {self.table} USING {self.method} "
                  f"({self._vexpr()} {opclass(self._vtype(), self.metric)})"
                  f"{self._with_clause()}")
        t2 = time.perf_counter_ns()
        self._run("CREATE INDEX", create)
        t3 = time.perf_counter_ns()
        for stmt in self._attr_indexes():
            self._run("CREATE INDEX", stmt)
        self._run("ANALYZE", f"ANALYZE {self.table}")
        self._start_searching()
        shown = {
            "enable_seqscan": self._show("enable_seqscan"),
            "maintenance_work_mem": self._show("maintenance_work_mem"),
            "max_parallel_maintenance_workers": int(self._show("max_parallel_maintenance_workers")),
        }
        plan = self.check_plan(x[:1], 10)
        fextra: dict[str, Any] = {}
        if self._fattrs is not None:
            fextra = {"attributes": self._fattrs.describe(),
                      "attribute_indexes": self._attr_indexes(),
                      "filter_plans": self._sample_filter_plans(x)}
        conn.remove_notice_handler(on_notice)
        return {
            "method": self.method,
            "create_index": create,
            "table": self.table,
            "where": self.where,
            "copy_s": (t1 - t0) / 1e9,
            "index_s": (t3 - t2) / 1e9,
            **shown,
            "notices": notices,
            "plan": plan,
            **self.server_facts(),
            **self._sizes(),
            **fextra,
        }

    def _search_sql(self) -> str:
        """The k-NN statement: ordered by the indexed expression; for a ``bit`` build the
        re-rank query (``k * oversample`` Hamming candidates, re-ranked by the float32
        column's own distance)."""
        if self._vtype() == "bit":
            over = int(self.search_params.model_dump().get("oversample") or 1)
            return rerank_sql(self.table, self.dim, self.metric, "%(q)b", f"%(k)s * {over}",
                              "%(k)s")
        v, op, q = self._vexpr(), OPERATOR[self.metric], self._qexpr()
        return f"SELECT id, {v} {op} {q} FROM {self.table} ORDER BY {v} {op} {q} LIMIT %(k)s"

    def _start_searching(self) -> None:
        self._sql = self._search_sql()
        # the planner costs an HNSW scan by ef_search: on a small table with a large ef_search
        # it picks an exact sequential scan + sort (seen at 3000 rows, ef_search 1000), which
        # would be timed as if it were the index. rwb measures the index: sequential scans are
        # disabled for this session and the plan is checked below (and before each measurement)
        self._run("SET", "SET enable_seqscan = off")
        if self.attribute_indexes:  # each filtered execution planned for its own values
            self._run("SET", "SET plan_cache_mode = force_custom_plan")
        self._apply_search_params()

    # --- another process's table (SupportsServerAttach) -------------------------------------
    def server_handle(self) -> dict[str, Any]:
        """The built table (name and rows), for a process that searches it (:meth:`attach`)."""
        if not self._sql:
            raise ConfigError(f"{self._where()}: server_handle() called before build()")
        return {"table": self.table, "n": self._n}

    def attach(self, handle: Mapping[str, Any]) -> None:
        """Search the table ``handle`` names (built by another process with the same params)
        instead of building one; the plan is checked as after a build; :meth:`close` leaves the
        table to its owner."""
        import re

        table = str(handle.get("table", ""))
        if not re.fullmatch(r"rwb_[0-9a-f]{12}", table):
            raise ConfigError(f"{self._where()}: attach handle field 'table' must be an rwb "
                              f"table name (rwb_ and 12 hex digits); received {table!r}")
        self._check_open()
        self.table, self._attached = table, True
        self.connect()
        self._start_searching()
        self.check_plan(np.zeros((1, self.dim), dtype=np.float32) + 0.5, 10)
        self._ids, self._n, self._built = None, int(handle.get("n", 0)), True
        self._checked_k = -1

    def _thread_session(self) -> Any:
        """A session for a call from a thread other than the index's own (a psycopg cursor is
        not shared between threads, and one connection is one server backend, which would
        serialise every client), with this index's session settings."""
        conn = self._open_connection()
        try:
            conn.execute("SET enable_seqscan = off")
            if self.attribute_indexes:
                conn.execute("SET plan_cache_mode = force_custom_plan")
            for line in self._set_lines():
                conn.execute(line)
        except Exception as exc:
            conn.close()
            raise self._fail("SET", exc) from None
        with self._lock:
            self._thread_conns.append(conn)
        return conn

    def _show(self, name: str) -> str:
        return str(self._run("SHOW", f"SHOW {name}").fetchone()[0])

    # --- plan check -------------------------------------------------------------------------
    def check_plan(self, query: np.ndarray, k: int) -> str:
        """EXPLAIN the search statement for ``query`` (1, dim) with the current settings; return
        the scan node (``Index Scan using <table>_idx``) or raise BackendError when the planner
        would not use this index (a sequential scan answers exactly, silently)."""
        nodes = self._explain_nodes(self._sql, {"q": np.ascontiguousarray(query[0]),
                                                "k": int(k)})
        index = f"{self.table}_idx"
        for node in nodes:
            if self._our_index(node.get("Index Name")) and "Index" in node.get("Node Type", ""):
                self._check_partition_scans(nodes)
                return f"{node['Node Type']} using {node['Index Name']}"
        kinds = ", ".join(n.get("Node Type", "?") for n in nodes)
        raise BackendError(
            f"{self._where()}: the planner does not use index {index} for the search (plan: "
            f"{kinds}); measuring it would time a different, exact scan. Check that the index "
            f"exists and its operator class matches metric '{self.metric}' ({OPS[self.metric]})"
        )

    def _explain_nodes(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every node of ``EXPLAIN (FORMAT JSON) sql`` with ``params``."""
        row = self._run("EXPLAIN", "EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
        doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
        return list(_plan_nodes(doc[0]["Plan"]))

    # --- search -----------------------------------------------------------------------------
    def _apply_search_params(self) -> None:
        self._plan_ok_k = -1  # the plan is checked again before the next measurement
        self._fplans = {}
        self._close_thread_conns()  # their sessions hold the old settings
        if self._conn is None or not self._built_or_building():
            return
        self._sql = self._search_sql()  # a bit build's oversample is in the statement
        for line in self._set_lines():
            self._run("SET", line)

    def _built_or_building(self) -> bool:
        return bool(self._sql)

    def _hot(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
        import psycopg

        if self._plan_ok_k != k:
            self.check_plan(np.zeros((1, self.dim), dtype=np.float32) + 0.5, k)
            self._plan_ok_k = k
        cur = self.connect().cursor()
        sql, fail = self._sql, self._fail
        owner, idle, session = threading.get_ident(), self._idle, self._thread_session

        def call(x: np.ndarray) -> Any:
            if threading.get_ident() == owner:
                c = cur
            else:  # an idle session of the pool, or a new one (as many as calls at once)
                try:
                    c = idle.get_nowait()
                except queue.Empty:
                    c = session().cursor()
            try:
                return c.execute(sql, {"q": x[0], "k": k}, prepare=True).fetchall()
            except psycopg.Error as exc:
                raise fail("search", exc) from None
            finally:
                if c is not cur:
                    idle.put(c)

        square = self.metric == "l2"

        def rows(raw: Any) -> tuple[np.ndarray, np.ndarray]:
            return _to_rows([raw], k, square)

        return call, rows

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        call, _ = self._hot(k)
        return _to_rows([call(x[i:i + 1]) for i in range(x.shape[0])], k,
                        self.metric == "l2")

    # --- size and lifecycle -----------------------------------------------------------------
    def _sizes(self) -> dict[str, int]:
        row = self._run(
            "size", f"SELECT sum(pg_table_size(relid)), sum(pg_indexes_size(relid)) FROM "
            f"{tree_sql('%(t)s')}", {"t": self.table}).fetchone()
        return {"relation_bytes": int(row[0]), "index_bytes": int(row[1])}

    def memory_bytes(self) -> int:
        """Bytes PostgreSQL stores for this index: the table (heap + TOAST, the vectors) plus
        the vector index (``pg_table_size + pg_indexes_size``), as the server measures them."""
        if not self._sql:
            raise ConfigError(f"{self._where()}: memory_bytes() called before build()")
        s = self._sizes()
        return s["relation_bytes"] + s["index_bytes"]

    def _release(self) -> None:
        conn, self._sql, self._plan_ok_k = self._conn, "", -1
        self._fplans, self._fbuilt = {}, None
        self._close_thread_conns()
        if self._attached:  # another process's table
            self._attached = False
            return
        if conn is not None and not conn.closed and self._owned:
            with contextlib.suppress(Exception):
                conn.execute(f"DROP TABLE IF EXISTS {self.table}")
                pg_unlock(conn, self.table)
                self._owned = False

    # --- writes (SlotWrites hooks) -----------------------------------------------------------
    def cannot_write(self) -> str | None:
        if self._attached:
            return "it searches a table another process built (attach)"
        return None

    def _built_count(self) -> int:
        return self._n

    def _check_writable(self) -> None:
        self._check_open()
        if not self._sql:
            raise ConfigError(f"{self._where()}: insert/delete called before build()")

    def _after_writes(self, live: int) -> None:
        self._n = live

    def _insert_rows(self, x: np.ndarray, slots: np.ndarray) -> None:
        import psycopg

        try:
            with self.connect().cursor() as cur, cur.copy(
                f"COPY {self.table} (id, embedding) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["int8", "vector"])
                for s, row in zip(slots.tolist(), x, strict=True):
                    copy.write_row((s, row))
        except psycopg.Error as exc:
            raise self._fail("insert (COPY)", exc) from None

    def _delete_rows(self, slots: np.ndarray) -> None:
        cur = self._run("DELETE", f"DELETE FROM {self.table} WHERE id = ANY(%(s)s)",
                        {"s": slots.tolist()})
        if cur.rowcount != slots.shape[0]:
            raise BackendError(f"{self._where()}: DELETE removed {cur.rowcount} of "
                               f"{slots.shape[0]} rows")

    def _maintain(self) -> tuple[str, dict[str, Any]]:
        """``VACUUM`` the table (reclaims dead tuples, repairs the index's links to them)."""
        before = self._dead_tuples()
        self._run("VACUUM", f"VACUUM {self.table}")
        return "vacuum", {"dead_tuples_before": before, **self._sizes()}

    def _dead_tuples(self) -> tuple[int, int]:
        """(n_live_tup, n_dead_tup) of the table from ``pg_stat_user_tables``."""
        self._run("stats", "SELECT pg_stat_clear_snapshot()")
        row = self._run("stats", "SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables "
                        "WHERE relid = %(t)s::regclass", {"t": self.table}).fetchone()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def dead_fraction(self) -> float | None:
        """Dead tuples / (live + dead) as the server's statistics report them (None before
        they report anything)."""
        self._check_writable()
        live, dead = self._dead_tuples()
        return dead / (live + dead) if live + dead else None

    def _close_thread_conns(self) -> None:
        with self._lock:
            conns, self._thread_conns = self._thread_conns, []
            self._idle = queue.SimpleQueue()
        for c in conns:
            with contextlib.suppress(Exception):
                c.close()

    def close(self) -> None:
        """Drop the table, close the connection; idempotent, quiet for a dead server."""
        super().close()
        self._close_thread_conns()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def __enter__(self) -> PgVectorIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(dim={self.dim}, metric={self.metric!r}, "
                f"build={self.build_params.model_dump()}, where={self.where!r})")


def _mem_literal(value: str) -> str:
    """``maintenance_work_mem`` value: digits and a unit (kB, MB, GB), nothing else."""
    import re

    if not re.fullmatch(r"\d+\s*(kB|MB|GB|TB)?", value.strip()):
        raise ConfigError(f"field 'maintenance_work_mem' must be like '512MB' (digits and kB, "
                          f"MB, GB or TB); received {value!r}")
    return value.strip()


def _plan_nodes(node: dict[str, Any]) -> Any:
    yield node
    for child in node.get("Plans", []) or []:
        yield from _plan_nodes(child)
