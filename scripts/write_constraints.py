"""Write scripts/constraints.txt: the exact versions `make` installs (``pip install -c``).

pyproject.toml gives ranges, so rwb installs next to a user's own stack; this file pins what was
tested. It holds every distribution that ``retrieval-workbench[dev]`` depends on, directly or
transitively, as installed in the running interpreter (nothing else it happens to hold):

    .venv/bin/python scripts/write_constraints.py          # after an upgrade, then commit it

Local version labels (``torch==2.13.0+cpu``) are dropped: the CPU build is chosen by where torch
is installed from (scripts/install_torch.sh), not by the pin.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "scripts" / "constraints.txt"
PROJECT = "retrieval-workbench"
EXTRAS = ("dev",)


def _requires(dist: md.Distribution, extras: set[str]) -> list[Requirement]:
    out = []
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker is None:
            out.append(req)
            continue
        if any(req.marker.evaluate({"extra": e}) for e in extras or {""}):
            out.append(req)
    return out


def project_requires(extras: set[str]) -> list[Requirement]:
    """The requirements of this checkout's pyproject.toml for ``extras`` (self-references to
    other extras followed), not of whatever version of rwb is installed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out = [Requirement(r) for r in project["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in project["optional-dependencies"].get(extra, []):
            req = Requirement(line)
            if canonicalize_name(req.name) == canonicalize_name(PROJECT):
                todo += list(req.extras)
            else:
                out.append(req)
    return out


def closure(extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """canonical name -> installed version of every distribution ``rwb[extras]`` needs."""
    pins: dict[str, str] = {}
    todo: list[tuple[str, set[str]]] = [(r.name, set(r.extras)) for r in
                                        project_requires(set(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        key = (canonicalize_name(name), frozenset(wanted))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # an optional dependency for another platform or Python
        pins[canonicalize_name(dist.metadata["Name"])] = re.sub(r"\+.*$", "", dist.version)
        for req in _requires(dist, wanted):
            todo.append((req.name, set(req.extras)))
    pins.pop(canonicalize_name(PROJECT), None)
    return dict(sorted(pins.items()))


def main() -> int:
    pins = closure()
    if not pins:
        print(f"{PROJECT} is not installed in {sys.executable}", file=sys.stderr)
        return 1
    head = ("# Exact versions `make` installs (pip install -c scripts/constraints.txt); the ranges "
            "are in\n# pyproject.toml. Written by scripts/write_constraints.py from the dev venv; "
            "do not edit by hand.\n")
    OUT.write_text(head + "".join(f"{n}=={v}\n" for n, v in pins.items()), encoding="utf-8")
    print(f"{OUT}: {len(pins)} pins")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
