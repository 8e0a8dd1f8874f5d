"""The local-server lifecycle every engine's private server shares, written once: free and busy
ports, the state file (``DIR/<name>.json``: port, host, pid, url) that ``stop`` and ``status``
find again, reuse of a live server recorded in ``DIR``, stale pid files of dead servers, the
start -> wait until ready -> record flow (with retries on a port taken meanwhile), the stop
escalation (the server's own shutdown, then SIGTERM, then SIGKILL of its pid), the private-server
context manager body, and the ``start`` / ``stop`` / ``status`` command line of
``python -m retrieval.services.<x>_server`` (this entry point prints: ``start`` prints
``ENV=URL``, ``status`` prints it or "not running" (exit 1), an RwbError is one line on stderr
(exit 2)).

An engine describes its server with a :class:`LocalService` (its descriptor's ``service``);
``rwb services start|stop NAME --dir DIR`` and the module entry points both run it. Times are in
seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from retrieval.errors import BackendError, ConfigError, RwbError

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


def pid_alive(pid: int, *, name: str | None = None) -> bool:
    """Whether process ``pid`` runs (psutil): a zombie is not; with ``name``, a process whose
    name and command line do not contain it (a recycled pid) is not either."""
    import psutil

    if pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if name is None:
            return True
        return name in proc.name() or any(name in part for part in proc.cmdline())
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def free_port(host: str = HOST) -> int:
    """A TCP port that is free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_in_use(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def wait_dead(pid: int, timeout_s: float, *, name: str | None = None) -> bool:
    """Wait up to ``timeout_s`` for ``pid`` to exit; True when it did."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid, name=name):
            return True
        time.sleep(0.02)
    return not pid_alive(pid, name=name)


def log_tail(path: Path, lines: int = 3) -> str:
    """The last ``lines`` lines of a server's log, on one line ('' when unreadable)."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


def clear_stale_pidfile(pidfile: Path, *, name: str | None = None) -> bool:
    """Remove ``pidfile`` when the pid on its first line no longer runs (a server that was
    killed left it; a live one's is never touched). True when it was removed. Not for a server
    that judges its own lock file (PostgreSQL's ``postmaster.pid`` also guards its shared
    memory)."""
    try:
        pid = int(pidfile.read_text().split()[0])
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        pid = 0  # unreadable: nobody can own it
    if pid_alive(pid, name=name):
        return False
    with contextlib.suppress(FileNotFoundError):
        pidfile.unlink()
    log.info("removed the stale pid file %s (pid %d is gone)", pidfile, pid)
    return True


@dataclass(frozen=True)
class ServerProcess:
    """A server started here: loopback ``host:port``, files in ``dir``, its ``pid``.
    Subclasses set ``STATE_FILE`` and ``PROCESS_NAME`` and implement ``url`` and
    :meth:`shutdown` (the server's own clean stop)."""

    STATE_FILE: ClassVar[str] = "server.json"
    #: a word in the process's name or command line (a recycled pid is not the server)
    PROCESS_NAME: ClassVar[str | None] = None

    port: int
    dir: Path
    pid: int
    host: str = HOST

    @property
    def url(self) -> str:
        raise NotImplementedError

    def is_alive(self) -> bool:
        return pid_alive(self.pid, name=self.PROCESS_NAME)

    def shutdown(self, timeout_s: float) -> None:
        """The server's own clean stop (may leave it running: :meth:`stop` escalates)."""

    def stop(self, timeout_s: float = 5.0, *, clean: bool = True) -> None:
        """:meth:`shutdown` (unless ``clean`` is False), then SIGTERM / SIGKILL of our own pid
        if it lingers; forget it."""
        if clean and self.is_alive():
            self.shutdown(timeout_s)
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None and self.is_alive():
                log.warning("%s pid %d did not exit; sending %s", self.PROCESS_NAME or "server",
                            self.pid, sig.name)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, sig)
            if wait_dead(self.pid, timeout_s if sig is None else 5.0, name=self.PROCESS_NAME):
                break
        self.forget()

    def forget(self) -> None:
        """Remove the state file (and whatever :meth:`own_files` names)."""
        for path in (self.dir / self.STATE_FILE, *self.own_files()):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def own_files(self) -> tuple[Path, ...]:
        return ()

    def record(self, **extra: Any) -> None:
        """Write the state file (port, host, pid, url and ``extra``)."""
        (self.dir / self.STATE_FILE).write_text(json.dumps(
            {"port": self.port, "host": self.host, "pid": self.pid, "url": self.url, **extra}))


S = TypeVar("S", bound=ServerProcess)


def read_state(cls: type[S], dir: Path) -> S | None:
    """The server recorded in ``dir``'s state file (alive or not), None when there is none."""
    try:
        data = json.loads((dir / cls.STATE_FILE).read_text())
        return cls(port=int(data["port"]), dir=dir, pid=int(data["pid"]),
                   host=str(data.get("host", HOST)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running(cls: type[S], dir: Path | str, ready: Callable[[S, float], Any],
            timeout_s: float) -> S | None:
    """The server recorded in ``dir`` when it is alive and ``ready(srv, timeout_s)`` passes."""
    srv = read_state(cls, Path(dir).resolve())
    if srv is None or not srv.is_alive():
        return None
    try:
        ready(srv, timeout_s)
    except BackendError:
        return None
    return srv


def start_local(
    cls: type[S], dir: Path | str | None, port: int | None, *, timeout_s: float, prefix: str,
    launch: Callable[[Path, int, float], S], ready: Callable[[S, float], dict[str, Any]],
    probe: Callable[[S, float], Any] | None = None, probe_s: float = 2.0, attempts: int = 3,
) -> S:
    """Start (or reuse, when ``dir`` records a live one on ``port``) a loopback server.

    ``launch(dir, port, timeout_s)`` starts the process and returns it; ``ready(srv, timeout_s)``
    waits until it answers (BackendError when it does not) and returns extra facts for the state
    file; ``probe(srv, probe_s)`` (default ``ready``) tells whether a recorded server still
    answers. ``port=None`` picks a free port, retried ``attempts`` times when taken meanwhile;
    a busy explicit port raises BackendError naming it; a port outside 1..65535 is a
    ConfigError. A live server of ``dir`` on another port is stopped first (one server per
    folder)."""
    path = Path(dir) if dir is not None else Path(tempfile.mkdtemp(prefix=prefix))
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    existing = running(cls, path, probe or ready, probe_s)
    if existing is not None and (port is None or existing.port == port):
        log.info("reusing %s pid %d at %s", cls.PROCESS_NAME, existing.pid, existing.url)
        return existing
    if existing is not None:
        existing.stop()
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"field 'port' must be in 1..65535; received {port}")
    last: BackendError | None = None
    for _ in range(1 if port is not None else attempts):
        chosen = port if port is not None else free_port()
        if port_in_use(chosen):
            last = BackendError(f"port {chosen} on {HOST} is already in use; choose another")
            continue
        srv = launch(path, chosen, timeout_s)
        try:
            facts = ready(srv, timeout_s)
        except BackendError as exc:
            srv.stop(timeout_s=5.0)
            last = exc
            continue
        srv.record(**facts)
        log.info("started %s pid %d at %s (dir %s)", cls.PROCESS_NAME, srv.pid, srv.url, path)
        return srv
    assert last is not None
    raise last


def stop_local(cls: type[ServerProcess], dir: Path | str, *, timeout_s: float) -> bool:
    """Stop the server recorded in ``dir``; False if none was running."""
    srv = read_state(cls, Path(dir).resolve())
    if srv is None:
        return False
    alive = srv.is_alive()
    srv.stop(timeout_s=timeout_s)
    return alive


class Started(Protocol):
    """What a service's ``start`` returns: the server's URL (no credentials in it)."""

    @property
    def url(self) -> str: ...


@dataclass(frozen=True)
class LocalService:
    """An engine's local server (its descriptor's ``service``), for ``rwb services start|stop``
    and ``python -m retrieval.services.<module>``. ``env``: the variable its URL goes to (the
    ``ENV=URL`` line); ``start(dir, port, timeout_s=)`` -> an object with ``url``;
    ``stop(dir)`` -> whether one was running; ``running(dir)`` -> the live server or None;
    ``timeout_s``: the default start timeout (seconds)."""

    module: str
    env: str
    start: Callable[..., Started]
    stop: Callable[[str], bool]
    running: Callable[[str], Started | None]
    timeout_s: float
    description: str
    dir_help: str = "folder for pid, log and state files"


def service_main(argv: Sequence[str] | None, service: LocalService) -> int:
    """The ``start`` / ``stop`` / ``status`` command line of ``service`` (prints)."""
    parser = argparse.ArgumentParser(prog=f"python -m retrieval.services.{service.module}",
                                     description=service.description)
    sub = parser.add_subparsers(dest="action", required=True)
    for action in ("start", "stop", "status"):
        p = sub.add_parser(action)
        p.add_argument("--dir", required=True, help=service.dir_help)
        if action == "start":
            p.add_argument("--port", type=int, default=None, help="default: a free port")
            p.add_argument("--timeout", type=float, default=service.timeout_s,
                           help="seconds to wait")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.action == "start":
            print(f"{service.env}={service.start(args.dir, args.port, timeout_s=args.timeout).url}")
        elif args.action == "stop":
            print("stopped" if service.stop(args.dir) else "not running")
        else:
            found = service.running(args.dir)
            if found is None:
                print("not running")
                return 1
            print(f"{service.env}={found.url}")
    except RwbError as exc:
        print(f"{service.module}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def private_server(start: Callable[..., Any], prefix: str, dir: str | Path | None,
                   port: int | None, timeout_s: float) -> Iterator[Any]:
    """The body of each service's context manager: ``start(dir, port, timeout_s=)`` in ``dir``
    (a fresh temp folder when None), yield the server, stop it after (and remove the temp
    folder); ``timeout_s`` in seconds."""
    tmp = dir is None
    path = Path(tempfile.mkdtemp(prefix=prefix)) if dir is None else Path(dir)
    srv = start(path, port, timeout_s=timeout_s)
    try:
        yield srv
    finally:
        srv.stop()
        if tmp:
            shutil.rmtree(path, ignore_errors=True)


__all__ = ["HOST", "LocalService", "ServerProcess", "clear_stale_pidfile", "free_port",
           "log_tail", "pid_alive", "port_in_use", "private_server", "read_state", "running",
           "service_main", "start_local", "stop_local", "wait_dead"]
