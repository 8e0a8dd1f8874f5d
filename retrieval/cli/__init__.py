"""The `rwb` command line. Thin: parses, calls the library, prints.

Subcommands live in ``retrieval/cli/cmd_*.py`` modules, each with ``register(subparsers)``;
they are discovered here, so adding a command never edits this file.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
from collections.abc import Sequence

from retrieval._version import __version__
from retrieval.errors import NotReachable, RwbError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rwb", description="retrieval-workbench: measure and tune the retrieval layer."
    )
    parser.add_argument("--version", action="version", version=f"rwb {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar or progress lines (also accepted after the "
                             "command); outside a terminal, progress is a plain line every "
                             "$RWB_PROGRESS_INTERVAL seconds (default 10)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import retrieval.cli as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if mod.name.startswith("cmd_"):
            module = importlib.import_module(f"{pkg.__name__}.{mod.name}")
            module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = build_parser()
    args_in = list(sys.argv[1:] if argv is None else argv)
    quiet = "--quiet" in args_in
    if quiet:  # a global flag, wherever it is written
        args_in = [a for a in args_in if a != "--quiet"]
    args = parser.parse_args(args_in)
    from retrieval.cli import _common

    _common.QUIET = quiet or bool(getattr(args, "quiet", False))
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    from retrieval.redact import SecretFilter, redact_text

    for handler in logging.getLogger().handlers:  # no secret in a log line (issue 34)
        if not any(isinstance(f, SecretFilter) for f in handler.filters):
            handler.addFilter(SecretFilter())
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from retrieval.phases import progress_to

    try:
        with progress_to(_common.phase_progress()):
            return int(args.func(args) or 0)
    except NotReachable as exc:  # not measurable here (docs/exit-codes.md)
        print(f"rwb: not measurable here: {redact_text(str(exc))}", file=sys.stderr)
        return 3
    except RwbError as exc:
        print(f"rwb: error: {redact_text(str(exc))}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        if not str(exc).startswith("Symlink loop from "):  # pathlib's resolve() on a loop
            raise
        print(f"rwb: error: {redact_text(str(exc).replace('Symlink loop from ', ''))} is a "
              f"symbolic link loop (it never reaches a file or folder); point it at the data",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rwb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _stdout_closed()


def _stdout_closed() -> int:
    """The reader of stdout went away (``rwb backends --json | head -1``): exit quietly, as a
    process killed by SIGPIPE would (128 + 13), the way Python's docs recommend: stdout is
    pointed at devnull so the interpreter's final flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (e.g. captured)
        pass
    return 141
