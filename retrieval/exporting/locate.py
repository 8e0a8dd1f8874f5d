"""Own data found again on another machine: a ``beir:`` folder or a pairs file an export names.

An export records the absolute path it measured and, beside it, ``location`` (:func:`location`):
the path relative to ``$RWB_DATA_DIR`` when it lay under it, and relative to the export file's
folder. ``rwb verify`` (:func:`locate`) takes, in order: the ``--dataset`` the user gave; the
recorded path; the relative ones resolved against today's ``$RWB_DATA_DIR`` and the export's
folder; a folder / file of the same name in ``$RWB_DATA_DIR`` or the current folder; and last
any folder / file there (3 levels deep) whose fingerprint is the recorded one. Where it was
found is said in one log line and in the report. The fingerprint always decides.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError

log = logging.getLogger(__name__)

#: how deep, and over how many folders, the fingerprint search looks in each place
SEARCH_DEPTH, SEARCH_FOLDERS = 3, 2000
_SKIP = {".git", ".venv", "node_modules", "__pycache__", ".services", ".test-cache"}


def location(path: str | Path, export_file: str | Path) -> dict[str, str]:
    """What an export records beside the absolute ``path``: ``data_dir`` (relative to
    ``$RWB_DATA_DIR``, when set and ``path`` lies under it) and ``export`` (relative to the
    export file's folder)."""
    from retrieval.paths import _env_data_dir

    p = Path(path).expanduser().resolve()
    out: dict[str, str] = {}
    try:
        env = _env_data_dir()
    except ConfigError:
        env = None
    if env is not None and p.is_relative_to(env.resolve()):
        out["data_dir"] = p.relative_to(env.resolve()).as_posix()
    here = Path(export_file).expanduser().resolve().parent
    out["export"] = Path(os.path.relpath(p, here)).as_posix()
    return out


def _walk(base: Path, want_dir: bool, suffix: str) -> Iterator[Path]:
    """Folders (``want_dir``) or files ending in ``suffix`` under ``base``, breadth first,
    :data:`SEARCH_DEPTH` levels and :data:`SEARCH_FOLDERS` folders at most; hidden folders and
    virtual environments skipped."""
    queue, seen = [(base, 0)], 0
    while queue and seen < SEARCH_FOLDERS:
        folder, depth = queue.pop(0)
        seen += 1
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                if want_dir:
                    yield entry
                if depth + 1 < SEARCH_DEPTH and entry.name not in _SKIP \
                        and not entry.name.startswith("."):
                    queue.append((entry, depth + 1))
            elif not want_dir and entry.name.endswith(suffix):
                yield entry


def locate(
    recorded: str | Path, *, what: str, where: str, export_file: str | Path,
    loc: Mapping[str, Any] | None, is_candidate: Callable[[Path], bool],
    matches: Callable[[Path], bool],
) -> tuple[Path, str | None]:
    """(the path to use, where it was found: None when it is the recorded one). ``what``
    names the data in messages ("BEIR folder", "pairs file"); ``is_candidate``: the right kind
    of path (a BEIR folder, a file); ``matches``: its fingerprint is the recorded one. A path
    found nowhere is returned as recorded: the caller then says it is not reachable."""
    from retrieval.paths import _env_data_dir

    rec = Path(recorded).expanduser()
    if rec.exists():
        return rec, None
    try:
        env = _env_data_dir()
    except ConfigError:
        env = None
    loc = loc or {}
    here = Path(export_file).expanduser().resolve().parent
    named: list[tuple[Path, str]] = []
    if env is not None and isinstance(loc.get("data_dir"), str):
        named.append((env / loc["data_dir"], "$RWB_DATA_DIR"))
    if isinstance(loc.get("export"), str):
        named.append((here / loc["export"], "beside the export"))
    places = [(env, "$RWB_DATA_DIR"), (Path.cwd(), "the current folder")]
    named += [(base / rec.name, label) for base, label in places if base is not None]
    checked: set[Path] = set()

    def found(cand: Path, label: str, how: str) -> tuple[Path, str]:
        note = f"{cand.resolve()} ({label}, {how})"
        log.warning("%s: %s %s is not there; using %s", where, what, rec, note)
        return cand.resolve(), note

    for cand, label in named:
        if cand.resolve() in checked:
            continue
        checked.add(cand.resolve())
        if is_candidate(cand) and matches(cand):
            return found(cand, label, "same fingerprint")
    want_dir = not rec.suffix
    for base, label in places:
        if base is None or not base.is_dir():
            continue
        for cand in _walk(base, want_dir, rec.suffix):
            if cand.resolve() in checked:
                continue
            checked.add(cand.resolve())
            if is_candidate(cand) and matches(cand):
                return found(cand, label, "found by its fingerprint")
    return rec, None


def given_path(given: Any, *, where: str, want: str, want_dir: bool) -> Path:
    """``--dataset`` as a path of the right kind (a folder, or a file), else one line."""
    p = Path(str(given)).expanduser()
    ok = p.is_dir() if want_dir else p.is_file()
    if not ok:
        got = ("a path that is not there" if not p.exists()
               else "a file" if p.is_file() else "a folder")
        raise ConfigError(f"{where}: --dataset '{given}': this export is verified on {want}; "
                          f"received {got}")
    return p.resolve()


__all__ = ["SEARCH_DEPTH", "SEARCH_FOLDERS", "given_path", "locate", "location"]
