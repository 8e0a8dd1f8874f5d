"""``rwb datasets``: list the dataset manifests and whether their files are present."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from retrieval.cli._common import print_json, print_table


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "datasets",
        help="list known datasets and where their files are looked for",
        description="List the dataset manifests (datasets/*.yaml), their kind, and the files "
        "each needs (present/missing). --load NAME loads one (embedding text datasets on "
        "first use, cached afterwards) and prints its shape, size on disk, whether it is read "
        "memory-mapped (out of core), the time to load and fingerprint it and the resident "
        "peak.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--load", metavar="NAME", help="load (and cache) this dataset, print a summary")
    p.set_defaults(func=run)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 10**9 else f"{n / 1e9:,.2f} GB"


def _status(entry: Any) -> str:
    if entry.error:
        return "invalid"
    return "ok" if entry.available else "missing"


def run(args: argparse.Namespace) -> int:
    from retrieval.api import list_datasets, load_dataset_info

    if args.load:
        summary = load_dataset_info(args.load)
        if args.json:
            print_json(summary)
        else:
            for key, value in summary.items():
                print(f"{key:>22}: {value}")
        return 0

    entries = list_datasets()
    if args.json:
        print_json([
            {**dataclasses.asdict(e), "status": _status(e), "disk_bytes": e.disk_bytes}
            for e in entries
        ])
        return 0
    rows = []
    for e in entries:
        missing = [f.path for f in e.files if not f.present]
        if e.error:
            where = e.error
        elif missing:
            where = "missing: " + ", ".join(missing)
        elif e.files:
            folders = sorted({f.path.rsplit("/", 1)[0] if len(e.files) > 1 else f.path
                              for f in e.files})
            where = ", ".join(folders)
        else:
            where = "(generated)"
        size = "" if e.disk_bytes is None else _mb(e.disk_bytes)
        rows.append([e.name, e.kind, _status(e), size, e.description, where])
    print_table(rows, ["name", "kind", "status", "on disk", "description", "files"])
    return 0
