"""`rwb tune ...`: a command group; each ``retrieval/cli/tune_*.py`` module adds one
subcommand (``tune_rerank`` -> ``rwb tune rerank``, ``tune_cache`` -> ``rwb tune cache``).

A tune module defines ``register(tune_subparsers) -> None`` and sets ``func=run`` on its parser,
exactly like the top-level ``cmd_*`` modules; adding one never edits this file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="tune a RAG-layer knob by measurement (rerank depth, ...)")
    tune_sub = p.add_subparsers(dest="tune_command", metavar="KNOB")
    p.set_defaults(func=_help(p))
    import retrieval.cli as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if mod.name.startswith("tune_"):
            module = importlib.import_module(f"{pkg.__name__}.{mod.name}")
            module.register(tune_sub)


def _help(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    return run
