"""The identity of an index cache entry and how rwb recognises its own entries (see
:mod:`retrieval.indexes.buildcache`): digests of arrays and of rwb's build code, the entry's
folder name (the hash of its identity) and the sidecar check that marks a folder as rwb's."""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

#: rwb's entry format (part of every entry's identity); 2: the sidecar carries MARKER and key
FORMAT = 2
#: the sidecar field that marks an entry rwb wrote (its value: FORMAT)
MARKER = "rwb_index_cache"
#: the entry's sidecar file (identity, files with size and sha256, build facts)
SIDECAR = "entry.json"
_KEY_RE = re.compile(r"[0-9a-f]{32}")


def array_digest(*arrays: np.ndarray | None) -> str:
    """sha256 (hex, 16 chars) of arrays' dtype, shape and bytes (None counts as absent)."""
    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"none")
            continue
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.data.cast("B") if a.size else b"")
    return h.hexdigest()[:16]


def _key_of(identity: dict[str, Any]) -> str:
    """The entry's folder name: the hash of the whole identity (data, build, seed, versions,
    build code), so that builds of other code or library versions are other entries."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def _legacy_key_of(identity: dict[str, Any]) -> str:
    """The folder name entries of format 1 had (the identity without the versions): only used
    to recognise such an entry as rwb's (to evict or clear it), never to take it."""
    core = {k: v for k, v in identity.items() if k not in ("library_version", "format")}
    return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:32]


def _ours(folder: Path, meta: Any) -> bool:
    """Whether ``meta`` (a parsed sidecar) marks ``folder`` as an entry rwb wrote."""
    if not isinstance(meta, dict) or not _KEY_RE.fullmatch(folder.name):
        return False
    if MARKER in meta:
        return meta.get("key") == folder.name
    ident = meta.get("identity")  # format 1: no marker; the name is the identity's hash
    return (isinstance(ident, dict) and ident.get("format") == 1
            and _legacy_key_of(ident) == folder.name)


def _read_sidecar(folder: Path) -> tuple[dict[str, Any] | None, str]:
    """(the parsed sidecar when it marks ``folder`` as rwb's, else None; the reason)."""
    try:
        meta = json.loads((folder / SIDECAR).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"no readable {SIDECAR} ({type(exc).__name__})"
    if not _ours(folder, meta):
        return None, f"its {SIDECAR} is not an rwb index cache entry's"
    return meta, ""


@lru_cache(maxsize=64)
def _dir_digest(dirs: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for d in dirs:
        for path in sorted(Path(d).glob("*.py")):
            h.update(path.name.encode())
            try:
                h.update(path.read_bytes())
            except OSError:
                h.update(b"unreadable")
    return h.hexdigest()[:16]


def code_version(cls: type | None = None) -> str:
    """rwb's version and a digest of the build code: every ``.py`` file in the folders of the
    rwb modules that define ``cls`` and its base classes, and of this module (a change of build
    code is another cache entry). ``cls`` None: this module's folder only."""
    import sys

    dirs = {str(Path(__file__).resolve().parent)}
    for klass in (cls.__mro__ if cls is not None else ()):
        mod = sys.modules.get(klass.__module__)
        path = getattr(mod, "__file__", None)
        if klass.__module__.startswith("retrieval.") and path:
            dirs.add(str(Path(path).resolve().parent))
    version = getattr(sys.modules.get("retrieval"), "__version__", "?")
    return f"{version}+{_dir_digest(tuple(sorted(dirs)))}"


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


__all__ = ["FORMAT", "MARKER", "SIDECAR", "array_digest", "code_version"]
