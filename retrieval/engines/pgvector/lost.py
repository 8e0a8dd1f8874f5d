"""A PostgreSQL server gone during a call (exit 3, "not reachable"), told apart from a statement
the server refused (exit 2)."""

from __future__ import annotations

from typing import Any

#: SQLSTATEs of a server going away: admin / crash shutdown, cannot connect now (class 08 too)
_GONE_STATES = frozenset({"57P01", "57P02", "57P03"})


def connection_lost(exc: BaseException, conn: Any = None) -> bool:
    """Whether ``exc`` (raised by a psycopg call) means the server went away during the call:
    an OperationalError with no server SQLSTATE (the socket closed: "server closed the
    connection unexpectedly", "the connection is lost"), a connection-class or shutdown
    SQLSTATE, or ``conn`` left broken or closed. A statement the server refused is not."""
    import psycopg

    if not isinstance(exc, psycopg.OperationalError):
        return False
    if conn is not None and (getattr(conn, "broken", False) or getattr(conn, "closed", False)):
        return True
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in _GONE_STATES
