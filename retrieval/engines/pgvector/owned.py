"""What rwb creates on a PostgreSQL server it does not own, and may therefore remove: nothing
else.

An index is a table ``rwb_<12 hex>`` that the build creates (never
adopted: ``CREATE TABLE`` fails on an existing name), marks with a comment (:data:`PG_MARK`
and a JSON record: host, pid, created) and holds a session advisory lock on (:data:`PG_LOCK_NS`,
``hashtext(table)``) while it lives. Only the instance that created a table drops it. A marked
table whose lock is free was left by a killed run: :func:`pg_leftovers` lists such tables (and
live ones, ``alive=True``), :func:`pg_drop_leftover` drops one; :func:`collect_leftovers` is the
engine's leftover hook (``rwb services cleanup``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import dataclass
from typing import Any

PG_MARK = "rwb-index "
#: the first key of rwb's advisory locks (the second: hashtext(table name))
PG_LOCK_NS = 0x72776201
TABLE_RE = re.compile(r"rwb_[0-9a-f]{12}")


def pg_mark(conn: Any, table: str) -> None:
    """Mark ``table`` (just created on ``conn``) as rwb's and hold its advisory lock for the
    session's lifetime."""
    if not TABLE_RE.fullmatch(table):
        raise ValueError(f"not an rwb table name: {table!r}")
    record = {"host": socket.gethostname(), "pid": os.getpid(),
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    comment = (PG_MARK + json.dumps(record)).replace("'", "''")
    conn.execute(f"COMMENT ON TABLE {table} IS '{comment}'")
    conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (PG_LOCK_NS, table))


def pg_unlock(conn: Any, table: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (PG_LOCK_NS, table))


@dataclass(frozen=True)
class PgTable:
    """An rwb-marked table: name, the marker record, bytes (table + indexes), whether the run
    that made it still holds its lock (``alive``)."""

    name: str
    record: dict[str, Any]
    bytes: int
    alive: bool

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "postgresql-table", "name": self.name, "bytes": self.bytes,
                "alive": self.alive,
                **{k: self.record.get(k) for k in ("host", "pid", "created")}}


_LIST_SQL = (
    "SELECT c.relname, obj_description(c.oid, 'pg_class'), pg_total_relation_size(c.oid) "
    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind = 'r' AND n.nspname = current_schema() "
    "AND c.relname ~ '^rwb_[0-9a-f]{12}$' ORDER BY c.relname"
)


def _alive(conn: Any, table: str) -> bool:
    got = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                       (PG_LOCK_NS, table)).fetchone()[0]
    if got:
        pg_unlock(conn, table)
    return not got


def pg_leftovers(conn: Any) -> list[PgTable]:
    """Every rwb-marked table of the current schema (an ``rwb_`` table without rwb's comment
    is not rwb's and is not listed)."""
    out = []
    for name, comment, size in conn.execute(_LIST_SQL).fetchall():
        if not (isinstance(comment, str) and comment.startswith(PG_MARK)):
            continue
        try:
            record = json.loads(comment[len(PG_MARK):])
        except ValueError:
            record = {}
        out.append(PgTable(str(name), record if isinstance(record, dict) else {}, int(size),
                           _alive(conn, str(name))))
    return out


def pg_drop_leftover(conn: Any, table: PgTable) -> bool:
    """Drop ``table`` when it is still rwb-marked and no session holds its lock (the lock is
    taken for the drop); False when it is in use again."""
    if not TABLE_RE.fullmatch(table.name):
        return False
    if not conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                        (PG_LOCK_NS, table.name)).fetchone()[0]:
        return False
    try:
        row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')",
                           (table.name,)).fetchone()
        if not (row and isinstance(row[0], str) and row[0].startswith(PG_MARK)):
            return False
        conn.execute(f"DROP TABLE {table.name}")
        return True
    finally:
        pg_unlock(conn, table.name)



def pg_connect(url: str) -> Any:
    """A psycopg connection (autocommit) to ``url``, or a BackendError naming it (password
    hidden)."""
    import psycopg

    from retrieval.errors import BackendError
    from retrieval.redact import redact_uri

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise BackendError(f"cannot connect to PostgreSQL at {redact_uri(url)}: "
                           f"{type(exc).__name__}: {first}") from None


def collect_leftovers(url: str, remove: bool) -> list[dict[str, Any]]:
    """``rwb services cleanup`` on the PostgreSQL at ``url``: every rwb-marked table as a row;
    with ``remove``, those whose run is gone (lock free) are dropped."""
    conn = pg_connect(url)
    try:
        out = []
        for t in pg_leftovers(conn):
            row = t.to_dict()
            row["removed"] = bool(remove and not t.alive and pg_drop_leftover(conn, t))
            out.append(row)
        return out
    finally:
        conn.close()


__all__ = [
    "PG_LOCK_NS",
    "PG_MARK",
    "PgTable",
    "collect_leftovers",
    "pg_connect",
    "pg_drop_leftover",
    "pg_leftovers",
    "pg_mark",
    "pg_unlock",
]
