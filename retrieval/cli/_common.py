"""Small helpers shared by CLI commands (printing lives only in the CLI)."""

from __future__ import annotations

import json
import os
import sys
import time
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


#: ``--quiet``: no progress at all (set by :func:`retrieval.cli.main`)
QUIET = False
#: seconds between two plain progress lines when stderr is not a terminal
#: (``$RWB_PROGRESS_INTERVAL`` overrides; 0 prints on every update)
DEFAULT_INTERVAL_S = 10.0
#: the clock of the plain progress lines (seconds; tests replace it)
clock: Callable[[], float] = time.monotonic


def progress_interval() -> float:
    """Seconds between plain progress lines: ``$RWB_PROGRESS_INTERVAL`` or 10."""
    raw = os.environ.get("RWB_PROGRESS_INTERVAL")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


#: an ETA is extrapolated only after this many steps and this share of the total (the first
#: steps carry one-off costs: loading, the first build, ground truth)
ETA_MIN_STEPS, ETA_MIN_SHARE = 3, 0.1


def eta_known(done: int, total: int) -> bool:
    """Whether ``done`` of ``total`` steps are enough to extrapolate an ETA from."""
    return ETA_MIN_STEPS <= done < total and done >= ETA_MIN_SHARE * total


def progress_lines(desc: str, *, use_total: bool = True, interval_s: float | None = None,
                   stream: Any = None) -> Progress:
    """A progress callback that writes a plain line to stderr at most every ``interval_s``
    seconds (the first after ``interval_s``): ``rwb <desc>: <phase> <done>/<total> (<pct>%)
    elapsed <t> ETA <t>`` (no total: the count only). For logs and CI, where a bar would be
    lost or garbled."""
    every = progress_interval() if interval_s is None else interval_s
    out = sys.stderr if stream is None else stream
    start = clock()
    last = [start]

    def progress(done: int, total: int, what: str) -> None:
        now = clock()
        if now - last[0] < every:
            return
        last[0] = now
        elapsed = now - start
        parts = [f"rwb {desc}:", what]
        if total and use_total:
            pct = 100.0 * done / total
            parts.append(f"{done}/{total} ({pct:.0f}%)")
            parts.append(f"elapsed {_duration(elapsed)}")
            if eta_known(done, total):
                parts.append(f"ETA {_duration(elapsed * (total - done) / done)}")
        else:
            parts += [f"{done} done", f"elapsed {_duration(elapsed)}"]
        print(" ".join(p for p in parts if p), file=out, flush=True)

    return progress


def progress_bar(
    desc: str, *, unit: str = "it", width: int = 60, use_total: bool = True
) -> tuple[Any, Progress | None]:
    """A tqdm bar on stderr and its callback when stderr is a terminal (whatever ``--json``
    says: the JSON goes to stdout, the bar to stderr); else ``(None, plain lines)``
    (:func:`progress_lines`); ``(None, None)`` with ``--quiet``. ``use_total`` False when the
    callback's total counts something else than its done. Close the bar."""
    if QUIET:
        return None, None
    if not sys.stderr.isatty():
        return None, progress_lines(desc, use_total=use_total)
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


def phase_progress() -> Callable[[str, int, int, str], None]:
    """The callback the CLI installs for :func:`retrieval.phases.report` (long phases: ground
    truth out of core, fingerprinting a large file, a scale study's sample sizes): one
    :func:`progress_bar` per phase (a bar on a terminal, plain lines in a pipe, nothing with
    ``--quiet``), opened at its first report and closed when it reports done == total."""
    import threading

    open_: dict[str, tuple[Any, Progress | None]] = {}
    lock = threading.Lock()

    def callback(phase: str, done: int, total: int, what: str) -> None:
        with lock:
            if phase not in open_:
                open_[phase] = progress_bar(phase, unit="", width=70)
            bar, progress = open_[phase]
            if progress is not None:
                progress(done, total, what)
            if total and done >= total:
                close_bar(bar)
                del open_[phase]

    return callback
