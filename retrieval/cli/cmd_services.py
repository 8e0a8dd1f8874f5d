"""``rwb services``: the servers rwb runs against.

- ``rwb services start NAME --dir DIR [--port P]`` starts an engine's local server (``redis``:
  Redis 8 with search, ``pgvector``: PostgreSQL + pgvector, ``milvus``: Milvus Lite) and prints
  ``ENV=URL``, as ``python -m retrieval.services.<x>_server start`` does; ``stop`` and
  ``status`` find it again through ``DIR``.
- ``rwb services cleanup`` lists, and with ``--yes`` removes, what killed rwb runs left on the
  PostgreSQL at ``$RWB_PG_URL`` (rwb-marked ``rwb_<hex>`` tables) and the Redis at
  ``$REDIS_URL`` (rwb-marked vector indexes and semantic cache indexes, with their keys).
  Nothing without rwb's marker is touched, nor anything a running rwb still holds.
"""

from __future__ import annotations

import argparse
import sys

from retrieval.cli._common import print_json, print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "services",
        help="the servers rwb runs against: start / stop a local one; list / remove what "
             "killed rwb runs left there",
        description=(
            "'rwb services start NAME --dir DIR' starts an engine's local server on loopback "
            "(redis, pgvector, milvus) and prints ENV=URL; 'stop' and 'status' find it through "
            "DIR. "
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
    for action, text in (("start", "start an engine's local server; prints ENV=URL"),
                         ("stop", "stop the local server recorded in --dir"),
                         ("status", "print ENV=URL of the server recorded in --dir (exit 1 "
                                    "when none runs)")):
        a = verbs.add_parser(action, help=text)
        a.add_argument("name", metavar="NAME", help="the engine (redis, pgvector, milvus)")
        a.add_argument("--dir", required=True, help="folder for the server's data, pid, log "
                       "and state files")
        if action == "start":
            a.add_argument("--port", type=int, default=None, help="default: a free port")
            a.add_argument("--timeout", type=float, default=None,
                           help="seconds to wait for it (default: the engine's)")
        a.set_defaults(func=globals()[f"run_{action}"])
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_start(args: argparse.Namespace) -> int:
    from retrieval.api import service_start

    print(service_start(args.name, args.dir, port=args.port, timeout_s=args.timeout).line)
    return 0


def run_stop(args: argparse.Namespace) -> int:
    from retrieval.api import service_stop

    print("stopped" if service_stop(args.name, args.dir) else "not running")
    return 0


def run_status(args: argparse.Namespace) -> int:
    from retrieval.api import service_status

    found = service_status(args.name, args.dir)
    print("not running" if found is None else found.line)
    return 1 if found is None else 0


def run_cleanup(args: argparse.Namespace) -> int:
    from retrieval.api import cleanup_options, services_cleanup

    given = {"--pg-url": args.pg_url, "--redis-url": args.redis_url}
    urls = {env: given.get(option) for option, env in cleanup_options().items()}
    report = services_cleanup(remove=args.remove, urls=urls)
    rows = report.objects
    if args.json:
        print_json(report.to_dict())
        return 0
    left = [r for r in rows if not r["alive"]]
    print(f"{len(rows)} rwb-marked objects on {' and '.join(report.servers)}: {len(left)} left "
          f"by runs that are gone, {len(rows) - len(left)} in use by running rwb processes")
    if rows:
        print_table([(r["kind"], r["name"], r.get("bytes", r.get("keys")),
                      "in use" if r["alive"] else ("removed" if r["removed"] else "left over"),
                      r.get("host"), r.get("pid"), r.get("created")) for r in rows],
                    ["kind", "name", "bytes/keys", "state", "host", "pid", "created"])
    if args.remove:
        print(f"removed {report.removed} objects")
    elif left:
        print("run `rwb services cleanup --yes` to remove the ones left over", file=sys.stderr)
    return 0
