"""`rwb watch SPEC`: the recall of a live collection in production, per window of checked
queries (docs/live.md, "Watching recall in production"). Exit 0, or 1 with ``--once`` when the
alarm was raised; 2 bad input; 3 not measurable here; 130 interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from retrieval.cli._common import fmt, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="watch a live collection's recall in production (sampled queries vs exact search)",
        description=(
            "Sample production queries from the spec's query log (followed as it grows, like "
            "tail -f; with --once one pass over it), run each on the live collection at the "
            "exported config's search params and exactly, and report per window of "
            "watch.window checked queries the recall, its lower bound and p50/p95/p99 ms. The "
            "alarm is raised when the lower bound stays under the target for "
            "watch.windows_to_alarm consecutive windows: a line on stderr naming what to do, "
            "an optional webhook POST, and with --once exit 1. The collection is only read."
        ),
    )
    p.add_argument("spec", help="a live spec (live:, queries:, k, target_recall, watch:)")
    p.add_argument("--config", help="the exported config (rwb export) whose search params are "
                   "watched; its recorded figures are the lab side of the report")
    p.add_argument("--once", action="store_true",
                   help="one pass over the log as it is now (cron, CI): exit 1 when the alarm "
                        "was raised, 0 otherwise")
    p.add_argument("--metrics-port", type=int, metavar="P",
                   help="serve Prometheus metrics on this port (0: a free one, printed)")
    p.add_argument("--metrics-addr", default="127.0.0.1",
                   help="address the metrics server listens on (default 127.0.0.1; 0.0.0.0 "
                        "for a Prometheus on another host)")
    p.add_argument("--max-windows", type=int, metavar="N",
                   help="stop after N windows (default: until interrupted or, with --once, the "
                        "end of the log)")
    p.add_argument("--out", help="folder for windows.jsonl and watch.json (default "
                   "runs/<name>-<time>)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run)


def _window_line(fig: dict[str, Any]) -> str:
    return (f"rwb watch: window {fig['window']}: recall {fmt(fig['recall'])} (lower bound "
            f"{fmt(fig['recall_lower'])}) p50 {fmt(fig['p50_ms'])} ms p95 {fmt(fig['p95_ms'])} "
            f"ms p99 {fmt(fig['p99_ms'])} ms, {fig['checked']} checked"
            f"{', ALARM' if fig['alarm'] else ''}")


def run(args: argparse.Namespace) -> int:
    from retrieval.api import WatchStop, watch
    from retrieval.cli import _common

    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        print(f"rwb: error: --metrics-port must be in 0..65535; received {args.metrics_port}",
              file=sys.stderr)
        return 2

    def ready(info: dict[str, Any]) -> None:
        if info.get("untested"):
            print(f"rwb watch: {info['untested']}", file=sys.stderr)
        port = info.get("metrics_port")
        where = f"; metrics on http://{args.metrics_addr}:{port}/metrics" if port else ""
        print(f"rwb watch: {info['engine']} {info['collection']}: {info['queries']}{where}; "
              f"windows to {info['out']}/windows.jsonl", file=sys.stderr, flush=True)

    def window(fig: dict[str, Any]) -> None:
        if not _common.QUIET:
            print(_window_line(fig), file=sys.stderr, flush=True)

    def alarm(a: dict[str, Any]) -> None:
        print(f"rwb watch: ALARM {a['engine']} {a['collection']}: {a['line']}", file=sys.stderr,
              flush=True)

    # Ctrl-C ends the watch before the next logged query (WatchStop), rather than by an
    # exception raised wherever the main thread is (a database call, a metrics update, a lock
    # held); a second Ctrl-C interrupts at once. A process started with SIGINT ignored (a
    # shell's background job) keeps ignoring it, as Python itself does.
    stop = WatchStop()

    def on_sigint(signum: int, frame: Any) -> None:
        stop.interrupt()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = None  # main() called from another thread: Ctrl-C as Python handles it
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
        previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        result = watch(args.spec, config=args.config, once=args.once,
                       metrics_port=args.metrics_port, metrics_addr=args.metrics_addr,
                       max_windows=args.max_windows, out=args.out, force=args.force,
                       on_window=window, on_alarm=alarm, on_ready=ready, stop=stop)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if args.json:
        print_json(result.to_dict())
    else:
        lab, live = result.lab, result.lab.get("live") or {}
        print(f"{result.engine} {result.collection}: {len(result.windows)} windows, "
              f"{result.checked} of {result.logged} logged queries checked, alarm "
              f"{'RAISED' if result.alarm else 'not raised'} ({result.stopped})")
        print(f"  live: recall {fmt(live.get('recall'))} (lower bound "
              f"{fmt(live.get('recall_lower'))}), p95 {fmt(live.get('p95_ms'))} ms")
        if lab.get("config"):
            print(f"  lab:  recall {fmt(lab.get('recall'))} (lower bound "
                  f"{fmt(lab.get('recall_lower'))}), p95 {fmt(lab.get('p95_ms'))} ms "
                  f"({lab['config']})")
        for note in result.notes:
            print(f"  note: {note}")
    if result.stopped == "interrupted":
        print("rwb: interrupted", file=sys.stderr)
        return 130
    return 1 if args.once and result.alarm else 0
