"""Small helpers shared by CLI commands (printing lives only in the CLI)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from retrieval.numfmt import format_number
from retrieval.runs import json_default

#: a progress callback: (done, total, description)
Progress = Callable[[int, int, str], None]


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=json_default)
    sys.stdout.write("\n")


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format_number(v)
    if isinstance(v, dict):
        return ",".join(f"{k}={fmt(x)}" for k, x in v.items()) or "-"
    return str(v)


def print_table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> None:
    body = [[fmt(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in body:
        widths = [max(w, len(c)) for w, c in zip(widths, r)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("  ".join("-" * w for w in widths))
    for r in body:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def _screen() -> tuple[int | None, int | None]:
    """tqdm's (width, height) where the terminal reports none (a pseudo-terminal of size
    0 x 0 would make tqdm draw nothing); else (None, None): tqdm asks the terminal itself."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        return None, None
    return (None, None) if size.columns and size.lines else (80, 24)


def progress_bar(
    desc: str, *, unit: str = "it", width: int = 60, use_total: bool = True
) -> tuple[Any, Progress | None]:
    """A tqdm bar on stderr and its callback when stderr is a terminal (whatever ``--json``
    says: the JSON goes to stdout, the bar to stderr), else ``(None, None)``; ``use_total``
    False when the callback's total counts something else than its done. Close the bar."""
    if not sys.stderr.isatty():
        return None, None
    from tqdm import tqdm

    ncols, nrows = _screen()
    bar = tqdm(desc=desc, unit=unit, leave=False, file=sys.stderr, ncols=ncols, nrows=nrows)

    def progress(done: int, total: int, what: str) -> None:
        if total and use_total:
            bar.total = total
        bar.n = done
        bar.set_postfix_str(what[:width])
        bar.refresh()

    return bar, progress


def close_bar(bar: Any) -> None:
    if bar is not None:
        bar.close()
