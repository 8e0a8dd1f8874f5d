"""``rwb cache list|clear``: the on-disk cache of built indexes (not the semantic cache of
``rwb tune cache``)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from retrieval.cli._common import print_json, print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="built-index cache: list, clear (the semantic cache is 'rwb tune cache')",
        description=(
            "Built indexes (hnswlib save_index, Faiss write_index) are cached so that a re-run "
            "sweep, a resumed sweep and 'rwb verify' load them instead of building again. The "
            "cache lives in $RWB_INDEX_CACHE_DIR (default <rwb cache dir>/indexes), is kept "
            "under $RWB_INDEX_CACHE_MAX_MB (default 4096) by evicting the least recently used "
            "entries, and RWB_INDEX_CACHE=off disables it. This is not the semantic query "
            "cache tuned by 'rwb tune cache'."
        ),
    )
    verbs = p.add_subparsers(dest="cache_command", metavar="ACTION")
    ls = verbs.add_parser("list", help="list cached index builds (most recently used first)")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(func=run_list)
    cl = verbs.add_parser("clear", help="remove every cached index build (only entries rwb "
                          "wrote: other files in the folder are left alone)")
    cl.add_argument("--json", action="store_true", help="machine-readable output")
    cl.set_defaults(func=run_clear)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _what(identity: dict[str, Any]) -> str:
    if identity.get("kind") == "quantizer":
        return f"nlist={identity.get('nlist')}"
    build = identity.get("build") or {}
    return ",".join(f"{k}={v}" for k, v in build.items() if v is not None) or "-"


def run_list(args: argparse.Namespace) -> int:
    from retrieval.indexes.buildcache import IndexCache

    cache = IndexCache()
    entries = cache.entries()
    total = sum(e.bytes for e in entries)
    if args.json:
        print_json({"dir": str(cache.root), "enabled": cache.enabled,
                    "max_bytes": cache.max_bytes, "bytes": total,
                    "entries": [e.to_dict() for e in entries]})
        return 0
    state = "" if cache.enabled else " (disabled: RWB_INDEX_CACHE=off)"
    print(f"index build cache {cache.root}{state}: {len(entries)} entries, "
          f"{total / 1e6:.1f} of {cache.max_bytes / 1e6:.0f} MB")
    if not entries:
        return 0
    rows = []
    for e in entries:
        ident = e.identity
        backend = ident.get("backend") or ("faiss-ivf" if e.kind == "quantizer" else "?")
        rows.append((
            e.key[:12], e.kind, backend, _what(ident) if not e.problem else e.problem,
            ident.get("n"), ident.get("data"), f"{e.bytes / 1e6:.1f}", e.build_s,
            e.build_threads, time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_used)),
        ))
    print_table(rows, ["key", "kind", "backend", "build", "n", "data", "MB", "build s",
                       "threads", "last used"])
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from retrieval.indexes.buildcache import IndexCache

    cache = IndexCache()
    done = cache.clear()
    if args.json:
        print_json({"dir": str(cache.root), "removed": done.removed, "bytes": done.bytes,
                    "failed": [{"key": k, "reason": r} for k, r in done.failed]})
    else:
        print(f"removed {done.removed} cached index builds ({done.bytes / 1e6:.1f} MB) from "
              f"{cache.root}")
    if done.failed:
        key, reason = done.failed[0]
        print(f"rwb: error: could not remove {len(done.failed)} cached index builds from "
              f"{cache.root} (entry {key}: {reason})", file=sys.stderr)
        return 1
    return 0
