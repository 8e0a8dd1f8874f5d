"""What every service module shares: the ``start`` / ``stop`` / ``status`` command line (for
scripts and the Makefile; this entry point prints): ``start`` prints ``ENV=URL``, ``status``
prints it or "not running" (exit 1), an RwbError is one line on stderr (exit 2); and the
private-server context manager body."""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from retrieval.errors import RwbError


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


def service_main(argv: Sequence[str] | None, *, name: str, description: str, env: str,
                 start: Callable[..., Any], stop: Callable[[str], bool],
                 running: Callable[[str], Any], timeout_s: float, dir_help: str) -> int:
    """Run one action; ``start(dir, port, timeout_s=)`` and ``running(dir)`` return an object
    with ``url`` (None from ``running`` when no server runs there); ``timeout_s`` in seconds."""
    parser = argparse.ArgumentParser(prog=f"python -m retrieval.services.{name}",
                                     description=description)
    sub = parser.add_subparsers(dest="action", required=True)
    for action in ("start", "stop", "status"):
        p = sub.add_parser(action)
        p.add_argument("--dir", required=True, help=dir_help)
        if action == "start":
            p.add_argument("--port", type=int, default=None, help="default: a free port")
            p.add_argument("--timeout", type=float, default=timeout_s, help="seconds to wait")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.action == "start":
            print(f"{env}={start(args.dir, args.port, timeout_s=args.timeout).url}")
        elif args.action == "stop":
            print("stopped" if stop(args.dir) else "not running")
        else:
            found = running(args.dir)
            if found is None:
                print("not running")
                return 1
            print(f"{env}={found.url}")
    except RwbError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
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
