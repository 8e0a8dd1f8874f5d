"""``rwb services cleanup``: list, and with ``--yes`` remove, what killed rwb runs left on the
PostgreSQL at ``$RWB_PG_URL`` (rwb-marked ``rwb_<hex>`` tables) and the Redis at ``$REDIS_URL``
(rwb-marked vector indexes of backend ``redis`` and semantic cache indexes, with their keys).
Nothing without rwb's marker is touched, nor anything a running rwb still holds."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from retrieval.cli._common import print_json, print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "services",
        help="the servers rwb runs against: list / remove what killed rwb runs left there",
        description=(
            "rwb marks every PostgreSQL table and Redis index (vector index or semantic cache) "
            "it creates, and drops them when its run ends. A run that was killed leaves them: "
            "'rwb services cleanup' lists rwb-marked objects on the PostgreSQL at $RWB_PG_URL "
            "and the Redis at $REDIS_URL, and removes those whose run is gone with --yes. "
            "Objects without rwb's marker (yours) are never listed nor touched."
        ),
    )
    verbs = p.add_subparsers(dest="services_command", metavar="ACTION")
    cl = verbs.add_parser("cleanup", help="list (and with --yes remove) what killed rwb runs "
                          "left on PostgreSQL and Redis")
    cl.add_argument("--yes", "--remove", dest="remove", action="store_true",
                    help="remove the leftovers (only rwb-marked objects no running rwb holds)")
    cl.add_argument("--pg-url", default=None, help="PostgreSQL (default: $RWB_PG_URL)")
    cl.add_argument("--redis-url", default=None, help="Redis (default: $REDIS_URL)")
    cl.add_argument("--json", action="store_true", help="machine-readable output")
    cl.set_defaults(func=run_cleanup)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _pg(url: str, remove: bool) -> list[dict[str, Any]]:
    from retrieval.engines.pgvector.owned import pg_connect, pg_drop_leftover, pg_leftovers

    conn = pg_connect(url)
    try:
        out = []
        for t in pg_leftovers(conn):
            row = t.to_dict()
            row["removed"] = bool(remove and not t.alive and pg_drop_leftover(conn, t))
            out.append(row)
        return out
    finally:
        conn.close()


def _redis(url: str, remove: bool) -> list[dict[str, Any]]:
    from retrieval.cache.owned import leftovers, remove_leftover
    from retrieval.cache.redis import connect_redis

    client = connect_redis(url)
    try:
        out = []
        for item in leftovers(client):
            row = item.to_dict()
            row["removed"] = False
            if remove and not item.alive:
                remove_leftover(client, item)
                row["removed"] = True
            out.append(row)
        return out
    finally:
        client.close()


def run_cleanup(args: argparse.Namespace) -> int:
    from retrieval.errors import ConfigError
    from retrieval.redact import redact_uri

    pg_url = args.pg_url or os.environ.get("RWB_PG_URL") or ""
    redis_url = args.redis_url or os.environ.get("REDIS_URL") or ""
    if not pg_url and not redis_url:
        raise ConfigError("services cleanup: no server to look at: set RWB_PG_URL and/or "
                          "REDIS_URL (or pass --pg-url / --redis-url)")
    rows: list[dict[str, Any]] = []
    servers = []
    if pg_url:
        servers.append(f"PostgreSQL {redact_uri(pg_url)}")
        rows += [{"server": servers[-1], **r} for r in _pg(pg_url, args.remove)]
    if redis_url:
        servers.append(f"Redis {redact_uri(redis_url)}")
        rows += [{"server": servers[-1], **r} for r in _redis(redis_url, args.remove)]
    if args.json:
        print_json({"servers": servers, "removed": sum(r["removed"] for r in rows),
                    "objects": rows})
        return 0
    left = [r for r in rows if not r["alive"]]
    print(f"{len(rows)} rwb-marked objects on {' and '.join(servers)}: {len(left)} left by "
          f"runs that are gone, {len(rows) - len(left)} in use by running rwb processes")
    if rows:
        print_table([(r["kind"], r["name"], r.get("bytes", r.get("keys")),
                      "in use" if r["alive"] else ("removed" if r["removed"] else "left over"),
                      r.get("host"), r.get("pid"), r.get("created")) for r in rows],
                    ["kind", "name", "bytes/keys", "state", "host", "pid", "created"])
    if args.remove:
        print(f"removed {sum(r['removed'] for r in rows)} objects")
    elif left:
        print("run `rwb services cleanup --yes` to remove the ones left over", file=sys.stderr)
    return 0
