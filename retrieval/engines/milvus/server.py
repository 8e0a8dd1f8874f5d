"""Run Milvus Lite as a separate process and connect to it by URI.

``milvus_lite_server(data_dir)`` starts ``python -m milvus_lite server --data-dir D --host
127.0.0.1 --port P`` (milvus-lite 3.2's gRPC server) on a free loopback port, waits until it
answers a real RPC, yields its URI (``http://127.0.0.1:P``) and stops it on exit (SIGINT, which
closes the database and releases its lock; SIGKILL only if it does not stop in time).

The in-process alternative (what ``MilvusClient("x.db")`` does) runs the same gRPC server in
threads of the calling process; a separate process takes its search compute off the client's
GIL. The fan-out benchmark compares the two.

``start_milvus`` / ``stop_milvus`` (and ``rwb services start milvus --dir DIR``, ``python -m
retrieval.services.milvus_server start --dir DIR``) run the same server detached, found again
through ``DIR/milvus.json``; it prints ``RWB_MILVUS_URI=http://127.0.0.1:P``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from retrieval.engines.milvus.common import URI_ENV
from retrieval.errors import BackendError, param_error
from retrieval.indexes.servers import (
    HOST,
    LocalService,
    ServerProcess,
    running,
    service_main,
    start_local,
    stop_local,
)

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def _answers(uri: str, timeout_s: float) -> bool:
    from pymilvus import MilvusClient

    from retrieval.engines.milvus.index import quiet_pymilvus

    try:
        with quiet_pymilvus():
            client = MilvusClient(uri=uri, timeout=timeout_s, dedicated=True)
            try:
                client.list_collections()
            finally:
                client.close()
    except Exception:
        return False
    return True


def _tail(path: Path, lines: int = 2) -> str:
    """The server's last output lines (its exception message), joined on one line."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-500:]


def _stop(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)  # KeyboardInterrupt: server.stop(grace) + db.close()
    try:
        proc.wait(timeout=grace_s)
        return
    except subprocess.TimeoutExpired:
        log.warning("milvus-lite server pid %d ignored SIGINT for %.0f s; killing", proc.pid,
                    grace_s)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait(timeout=10)


@contextlib.contextmanager
def milvus_lite_server(
    data_dir: Path | str,
    port: int | None = None,
    *,
    threads: int | None = 1,
    max_workers: int = 10,
    startup_timeout_s: float = 60.0,
    stop_grace_s: float = 10.0,
) -> Iterator[str]:
    """Start a Milvus Lite server process on 127.0.0.1; yield its URI; stop it on exit.

    ``data_dir``: the database directory (created; one server per directory: Milvus Lite locks
    it). ``port``: None picks a free one (retried if another process takes it first).
    ``threads``: OMP_NUM_THREADS of the server (faiss), None to inherit. Startup and stop
    timeouts are in seconds. Raises BackendError (naming the URI and the server's last output)
    if it does not answer within ``startup_timeout_s``.
    """
    if port is not None and not 1 <= int(port) <= 65535:
        raise param_error("port", "in [1, 65535] or None", port, where="milvus_lite_server")
    if threads is not None and int(threads) < 1:
        raise param_error("threads", ">= 1 or None", threads, where="milvus_lite_server")
    data = Path(data_dir).resolve()
    data.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(int(threads))
    host = "127.0.0.1"
    attempts = 1 if port is not None else 3
    fd, log_name = tempfile.mkstemp(prefix="rwb-milvus-server-", suffix=".log")
    os.close(fd)
    log_path = Path(log_name)
    proc: subprocess.Popen[bytes] | None = None
    uri = ""
    try:
        for attempt in range(attempts):
            chosen = int(port) if port is not None else free_port(host)
            uri = f"http://{host}:{chosen}"
            cmd = [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data),
                   "--host", host, "--port", str(chosen), "--max-workers", str(max_workers)]
            with log_path.open("wb") as out:
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                        stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + startup_timeout_s
            answered = False
            while time.monotonic() < deadline and proc.poll() is None:
                if _port_open(host, chosen) and _answers(uri, timeout_s=2.0):
                    answered = True
                    break
                time.sleep(0.1)
            if answered:
                break
            exited = proc.poll() is not None
            _stop(proc, stop_grace_s)
            proc = None
            if not exited or attempt == attempts - 1:
                raise BackendError(
                    f"milvus_lite_server: server at {uri} (data dir {data}) "
                    f"{'exited' if exited else f'did not answer within {startup_timeout_s:g} s'}"
                    f"; last output: {_tail(log_path) or '(none)'}"
                )
            log.info("milvus-lite server on %s exited at start (port taken?); retrying", uri)
        assert proc is not None
        log.info("milvus-lite server pid %d at %s (data dir %s)", proc.pid, uri, data)
        yield uri
    finally:
        if proc is not None:
            _stop(proc, stop_grace_s)
        with contextlib.suppress(OSError):
            log_path.unlink()


STATE_FILE = "milvus.json"


@dataclass(frozen=True)
class MilvusLiteServer(ServerProcess):
    """A Milvus Lite server process started by :func:`start_milvus` (detached: it outlives the
    command that started it), data in ``dir/data``, output in ``dir/milvus.log``."""

    STATE_FILE: ClassVar[str] = STATE_FILE
    PROCESS_NAME: ClassVar[str | None] = "milvus_lite"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def logfile(self) -> Path:
        return self.dir / "milvus.log"

    def shutdown(self, timeout_s: float) -> None:
        """SIGINT: Milvus Lite closes its database and releases its lock."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)


def _launch_detached(dir: Path, port: int, timeout_s: float) -> MilvusLiteServer:
    data = dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data),
           "--host", HOST, "--port", str(port)]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with (dir / "milvus.log").open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return MilvusLiteServer(port=port, dir=dir, pid=proc.pid)


def _ready_detached(srv: MilvusLiteServer, timeout_s: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not srv.is_alive():
            raise BackendError(f"milvus-lite server at {srv.url} exited during start-up; last "
                               f"output: {_tail(srv.logfile) or '(none)'}")
        if _port_open(srv.host, srv.port) and _answers(srv.url, timeout_s=2.0):
            return {}
        time.sleep(0.1)
    raise BackendError(f"milvus-lite server at {srv.url} did not answer within {timeout_s:g} s; "
                       f"last output: {_tail(srv.logfile) or '(none)'}")


def _probe(srv: MilvusLiteServer, timeout_s: float) -> None:
    if not _answers(srv.url, timeout_s=timeout_s):
        raise BackendError(f"milvus-lite server at {srv.url} does not answer")


def start_milvus(dir: Path | str | None = None, port: int | None = None, *,
                 timeout_s: float = 60.0) -> MilvusLiteServer:
    """Start (or reuse, if ``dir`` already holds a live one) a detached Milvus Lite server on
    loopback, its data in ``dir/data``; ``port=None`` picks a free one; ``timeout_s`` in
    seconds. For one run, :func:`milvus_lite_server` (a context manager) is the lighter way."""
    try:
        import milvus_lite  # noqa: F401
    except ImportError:
        raise BackendError("no Milvus Lite: install the 'milvus' extra "
                           "(pip install 'retrieval-workbench[milvus]')") from None
    return start_local(MilvusLiteServer, dir, port, timeout_s=timeout_s, prefix="rwb-milvus-",
                       launch=_launch_detached, ready=_ready_detached, probe=_probe)


def stop_milvus(dir: Path | str, *, timeout_s: float = 10.0) -> bool:
    """Stop the server recorded in ``dir``; False if none was running."""
    return stop_local(MilvusLiteServer, dir, timeout_s=timeout_s)


def running_milvus(dir: Path | str) -> MilvusLiteServer | None:
    """The server recorded in ``dir`` if it is alive and answering, else None."""
    return running(MilvusLiteServer, dir, _probe, 5.0)


SERVICE = LocalService(
    module="milvus_server", env=URI_ENV, start=start_milvus, stop=lambda dir: stop_milvus(dir),
    running=running_milvus, timeout_s=60.0,
    description="Start/stop a loopback Milvus Lite server (milvus-lite's gRPC server).",
    dir_help="folder for the database, log and state files")


def main(argv: Sequence[str] | None = None) -> int:
    """``start``/``stop``/``status`` for scripts (this entry point prints)."""
    return service_main(argv, SERVICE)


__all__ = ["SERVICE", "MilvusLiteServer", "free_port", "main", "milvus_lite_server",
           "running_milvus", "start_milvus", "stop_milvus"]


if __name__ == "__main__":
    raise SystemExit(main())
