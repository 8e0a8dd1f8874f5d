"""Index builds paid once: an on-disk cache of built indexes in their libraries' own formats.

An entry is one built index (a backend implementing
:class:`retrieval.indexes.base.SupportsSnapshot`: hnswlib ``save_index``, Faiss ``write_index``;
never pickle) in a folder named by the hash of its identity: the data (a dataset fingerprint or
a digest of the vectors and ids), the backend, its build params, the seed, n, dim and metric.
The library version, rwb's entry format and a digest of rwb's build code (:func:`code_version`:
the sources of the backend's modules) are part of the identity and of the folder name, so that
an index built by other code is never taken. The identity is checked against the entry's sidecar
``entry.json`` (which also holds the size and sha256 of every file, the original build time and
the build threads): an entry that is corrupt, truncated, from another library version or for
another identity is rebuilt with a warning, never trusted. A request for a reproducible build
(one build thread) does not take an entry built with several threads.

Only entries rwb wrote are ever removed (replaced, evicted, cleared): a folder whose sidecar
carries rwb's marker (``"rwb_index_cache"``) and its own folder name as ``"key"`` (or, for
entries of the first format, whose name is the hash of the sidecar's identity). Any other file
or folder in the cache folder is left alone, not counted and not listed.

Builds with the same data and ``nlist`` share one trained Faiss IVF coarse quantizer through
:class:`TrainedStore` (in memory, and on disk as a ``quantizer`` entry of this cache).

The cache lives in ``$RWB_INDEX_CACHE_DIR``, else ``<rwb cache dir>/indexes``; its size is kept
under ``$RWB_INDEX_CACHE_MAX_MB`` (default 4096 MB) by evicting the least recently used entries;
``RWB_INDEX_CACHE=off`` disables it. A folder that cannot be written (read-only, full) gives one
warning and the builds go on without caching.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from retrieval.errors import ConfigError, DataError
from retrieval.indexes.base import (
    BuildInfo,
    IndexBackend,
    SupportsBuildThreads,
    SupportsSnapshot,
)
from retrieval.indexes.cachekeys import (
    FORMAT,
    MARKER,
    SIDECAR,
    _dir_digest,  # noqa: F401  (re-exported: tests clear its cache)
    _key_of,
    _read_sidecar,
    _sha256,
    array_digest,
    code_version,
)
from retrieval.indexes.trained import TrainedStore  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

#: a marker file inside rwb's temporary folders (only those are ever cleaned up)
_TMP_MARK = ".rwb-writing"
_TMP_PREFIX = ".rwb-tmp-"
_TRASH_PREFIX = ".rwb-trash-"
_TRASH_RE = re.compile(re.escape(_TRASH_PREFIX) + r"[0-9a-f]{32}-[0-9]+-[0-9]+")
ENV_DIR = "RWB_INDEX_CACHE_DIR"
ENV_MAX = "RWB_INDEX_CACHE_MAX_MB"
ENV_SWITCH = "RWB_INDEX_CACHE"
DEFAULT_MAX_MB = 4096.0
_OFF = ("off", "0", "false", "no")
#: temporary folders of writers that died are removed after this many seconds
_STALE_TMP_S = 3600.0

CacheUse = Literal["hit", "miss", "off"]


def _env_max_mb() -> float | None:
    raw = os.environ.get(ENV_MAX)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"environment variable {ENV_MAX} must be a number of megabytes > 0; "
                          f"received '{raw}'")
    return value


def _env_enabled() -> bool:
    raw = os.environ.get(ENV_SWITCH, "on").strip().lower()
    if raw in _OFF:
        return False
    if raw in ("on", "1", "true", "yes", ""):
        return True
    raise ConfigError(f"environment variable {ENV_SWITCH} must be one of on, off; received "
                      f"'{raw}'")


def default_root() -> Path:
    """``$RWB_INDEX_CACHE_DIR``, else ``<rwb cache dir>/indexes`` (created on first write)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    from retrieval.paths import cache_dir

    try:
        return cache_dir() / "indexes"
    except OSError:  # an unusable rwb cache dir: writes will warn once, reads find nothing
        env = os.environ.get("RWB_CACHE_DIR")
        return (Path(env).expanduser() if env else Path.home() / ".cache" / "rwb") / "indexes"


@dataclass(frozen=True)
class CacheSettings:
    """Whether the cache is used, where it lives and its size limit (MB = 10**6 bytes). None
    fields take the environment (see the module doc), then the defaults."""

    enabled: bool | None = None
    root: Path | None = None
    max_mb: float | None = None

    def resolve(self) -> tuple[bool, Path, int]:
        enabled = _env_enabled() and (self.enabled is not False)
        max_mb = self.max_mb if self.max_mb is not None else (_env_max_mb() or DEFAULT_MAX_MB)
        root = self.root if self.root is not None else default_root()
        return enabled, Path(root), int(max_mb * 1e6)


@dataclass(frozen=True)
class Outcome:
    """How one index came to be: ``cache`` hit (loaded, ``load_s`` seconds), miss (built and,
    when ``stored``, saved) or off (cache disabled, or a backend without snapshots).
    ``build_s`` is always the original build time (of the build that made the entry)."""

    cache: CacheUse
    build_s: float
    load_s: float | None = None
    key: str | None = None
    stored: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cache": self.cache, "build_s": self.build_s,
                               "load_s": self.load_s, "stored": self.stored}
        if self.key:
            out["key"] = self.key
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Entry:
    """One cache entry as listed by ``rwb cache list`` (``bytes``: every file; ``last_used``:
    epoch seconds)."""

    key: str
    kind: str
    path: Path
    bytes: int
    last_used: float
    identity: dict[str, Any] = field(default_factory=dict)
    build_s: float | None = None
    build_threads: int | None = None
    created: str = ""
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "path": str(self.path), "bytes": self.bytes,
                "last_used": self.last_used, "identity": self.identity, "build_s": self.build_s,
                "build_threads": self.build_threads, "created": self.created,
                "problem": self.problem}


def index_identity(
    index: IndexBackend, n: int, data: str, ids: np.ndarray | None
) -> dict[str, Any]:
    """What makes a built index the same one: data, backend, build params, seed, size, metric
    and versions (library, rwb entry format, rwb build code)."""
    return {
        "kind": "index", "format": FORMAT, "backend": index.name,
        "library_version": type(index).library_version(),
        "build_code": code_version(type(index)),
        "build": index.build_params.model_dump(mode="json"), "seed": index.seed,
        "data": data, "ids": None if ids is None else array_digest(np.asarray(ids)),
        "n": int(n), "dim": index.dim, "metric": index.metric,
    }


@dataclass(frozen=True)
class Cleared:
    """What ``clear`` did: entries and bytes removed, and the entries that could not be removed
    (``(key, reason)``)."""

    removed: int
    bytes: int
    failed: tuple[tuple[str, str], ...] = ()


def _remove(folder: Path) -> str:
    """Remove an entry folder of rwb's: renamed aside first (so that a cache it cannot write
    keeps the entry whole), then deleted. '' when gone, else the reason."""
    trash = folder.with_name(f"{_TRASH_PREFIX}{folder.name}-{os.getpid()}-{time.time_ns()}")
    try:
        os.rename(folder, trash)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    shutil.rmtree(trash, ignore_errors=True)
    if trash.exists():  # renamed aside: no longer an entry; the next clean-up retries
        log.info("index cache: %s could not be deleted completely", trash)
    return ""


def _mine_tmp(path: Path) -> bool:
    """A temporary folder rwb made (marker file inside), or an entry it renamed aside."""
    if path.name.startswith(_TMP_PREFIX):
        return (path / _TMP_MARK).is_file()
    return _TRASH_RE.fullmatch(path.name) is not None


class IndexCache:
    """The on-disk cache (see the module doc). Methods never raise for a bad entry or an
    unwritable folder: they warn and report a miss / not stored. Only entries rwb wrote are
    ever removed."""

    def __init__(self, settings: CacheSettings | None = None) -> None:
        self.settings = settings or CacheSettings()
        self.enabled, self.root, self.max_bytes = self.settings.resolve()
        self._unwritable = False
        self._told_too_big = False  # "does not fit" is warned once (then logged at info)

    def _limit_source(self) -> str:
        """Where the size limit came from, for messages."""
        if self.settings.max_mb is not None:
            return "the spec's index_build.cache_max_mb"
        return ENV_MAX if os.environ.get(ENV_MAX) else f"the default; set {ENV_MAX}"

    # --- reading -------------------------------------------------------------------------------
    def _drop(self, folder: Path, why: str) -> None:
        """Warn that the entry at ``folder`` is not taken; remove it (an entry of rwb's)."""
        meta, _ = _read_sidecar(folder)
        if meta is None:
            log.warning("index cache: %s; rebuilding (the folder is left alone: it holds no "
                        "rwb entry marker; remove it if it is not yours)", why)
            return
        failed = _remove(folder)
        log.warning("index cache: %s; rebuilding (entry %s %s)", why, folder.name,
                    "removed" if not failed else f"could not be removed: {failed}")

    def _checked_meta(self, folder: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
        """The sidecar of ``folder`` when every check passes, else None (warned; removed when
        it is rwb's)."""
        try:
            meta = json.loads((folder / SIDECAR).read_text(encoding="utf-8"))
            files = dict(meta["files"])
            have = dict(meta["identity"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._drop(folder, f"entry {folder.name} has no readable {SIDECAR} "
                       f"({type(exc).__name__})")
            return None
        if have != identity:
            diff = sorted(k for k in set(have) | set(identity) if have.get(k) != identity.get(k))
            if len(diff) == 1 and diff[0] in ("library_version", "format", "build_code"):
                what = (identity.get("backend", "trained") if diff == ["library_version"]
                        else "rwb")
                why = (f"entry {folder.name} was written by {what} {diff[0]} "
                       f"{have.get(diff[0])!r}, this is {identity.get(diff[0])!r}")
            else:
                why = f"entry {folder.name} is for another build ({', '.join(diff)} differ)"
            self._drop(folder, why)
            return None
        try:
            float(meta["build_s"]) if identity.get("kind") == "index" else None
            int(meta.get("build_threads") or 1)
            if meta.get("memory_bytes") is not None:
                int(meta["memory_bytes"])
            for want in files.values():
                int(want["bytes"]), str(want["sha256"])
        except (KeyError, TypeError, ValueError) as exc:
            self._drop(folder, f"entry {folder.name} has a corrupt {SIDECAR} "
                       f"({type(exc).__name__}: {exc})")
            return None
        for name, want in files.items():
            path = folder / name
            try:
                size = path.stat().st_size
                ok = size == int(want["bytes"]) and _sha256(path) == want["sha256"]
            except (OSError, KeyError, TypeError, ValueError):
                ok, size = False, -1
            if not ok:
                self._drop(folder, f"entry {folder.name}: file {name} is truncated or corrupt "
                           f"({size} bytes, {want.get('bytes')} recorded, checksum mismatch)")
                return None
        return meta

    def _touch(self, folder: Path) -> None:
        with contextlib.suppress(OSError):  # a read-only cache still serves hits
            os.utime(folder / SIDECAR)

    def fetch(self, index: IndexBackend, identity: dict[str, Any], *,
              reproducible: bool) -> tuple[BuildInfo, Outcome] | None:
        """Load the entry of ``identity`` into ``index``; None on a miss. ``reproducible``: an
        entry built with several threads is not taken (it would not be the one-thread graph)."""
        if not self.enabled or not isinstance(index, SupportsSnapshot):
            return None
        key = _key_of(identity)
        folder = self.root / key
        if not folder.is_dir():
            return None
        meta = self._checked_meta(folder, identity)
        if meta is None:
            return None
        threads = int(meta.get("build_threads") or 1)
        if reproducible and threads > 1:
            log.info("index cache: entry %s was built with %d threads; building again with one "
                     "(reproducible)", key, threads)
            return None
        t0 = time.perf_counter()
        try:
            index.load_snapshot(folder, int(identity["n"]))
        except DataError as exc:
            self._drop(folder, f"entry {key} could not be loaded ({exc})")
            return None
        load_s = time.perf_counter() - t0
        self._touch(folder)
        extra = meta.get("extra")
        info = BuildInfo(n=int(identity["n"]), build_s=float(meta["build_s"]),
                         memory_bytes=meta.get("memory_bytes"),
                         extra=dict(extra) if isinstance(extra, dict) else {})
        return info, Outcome("hit", info.build_s, load_s, key, True)

    # --- writing -------------------------------------------------------------------------------
    def _cannot_write(self, exc: BaseException) -> None:
        if not self._unwritable:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            log.warning("index cache: cannot write to %s (%s); building without caching "
                        "(set %s to a writable folder, or %s=off)", self.root, reason, ENV_DIR,
                        ENV_SWITCH)
        self._unwritable = True

    def _write(self, identity: dict[str, Any], save: Any, extra_meta: dict[str, Any]) -> str | None:
        """Write an entry: ``save(folder) -> file names`` into a temporary folder, checksums,
        sidecar, then one rename. Returns the key, or None when not stored (warned)."""
        if not self.enabled or self._unwritable:
            return None
        key = _key_of(identity)
        final = self.root / key
        if final.exists() and _read_sidecar(final)[0] is None:
            log.warning("index cache: %s exists and is not an rwb entry (%s); not replaced, "
                        "this build is not cached", final, _read_sidecar(final)[1])
            return None
        tmp: Path | None = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=self.root))
            (tmp / _TMP_MARK).touch()
            names = save(tmp)
            files = {n: {"bytes": (tmp / n).stat().st_size, "sha256": _sha256(tmp / n)}
                     for n in names}
            total = sum(int(f["bytes"]) for f in files.values())
            if total > self.max_bytes:
                level = logging.INFO if self._told_too_big else logging.WARNING
                self._told_too_big = True
                log.log(level, "index cache: an entry of %.3g MB does not fit the limit of "
                        "%.3g MB (%s); not cached", total / 1e6, self.max_bytes / 1e6,
                        self._limit_source())
                shutil.rmtree(tmp, ignore_errors=True)
                return None
            meta = {MARKER: FORMAT, "key": key, "identity": identity, "files": files,
                    "bytes": total,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra_meta}
            (tmp / SIDECAR).write_text(json.dumps(meta, indent=1, sort_keys=True),
                                       encoding="utf-8")
            (tmp / _TMP_MARK).unlink()
            if final.exists():  # a stale entry of rwb's (found bad, or raced by another writer)
                _remove(final)
            try:
                os.rename(tmp, final)
            except OSError:
                if not (final / SIDECAR).is_file():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another writer got there first
            tmp = None
        except (OSError, RuntimeError) as exc:  # RuntimeError: Faiss's write error
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            self._cannot_write(exc)
            return None
        self.evict(keep=key)
        return key

    def store(self, index: IndexBackend, identity: dict[str, Any], info: BuildInfo,
              build_threads: int) -> str | None:
        """Save a freshly built ``index`` as the entry of ``identity``; its key, or None."""
        if not isinstance(index, SupportsSnapshot):
            return None
        meta = {"build_s": info.build_s, "memory_bytes": info.memory_bytes,
                "extra": _plain(info.extra), "build_threads": int(build_threads),
                "snapshot_format": index.snapshot_format}
        return self._write(identity, index.save_snapshot, meta)

    # --- trained parts -------------------------------------------------------------------------
    def fetch_array(self, identity: dict[str, Any]) -> np.ndarray | None:
        if not self.enabled:
            return None
        folder = self.root / _key_of(identity)
        if not folder.is_dir() or self._checked_meta(folder, identity) is None:
            return None
        try:
            arr = np.load(folder / "array.npy", allow_pickle=False)
        except (OSError, ValueError) as exc:
            self._drop(folder, f"entry {folder.name}: array.npy not readable ({exc})")
            return None
        self._touch(folder)
        return arr

    def store_array(self, identity: dict[str, Any], arr: np.ndarray) -> str | None:
        def save(folder: Path) -> list[str]:
            np.save(folder / "array.npy", np.ascontiguousarray(arr), allow_pickle=False)
            return ["array.npy"]

        return self._write(identity, save, {})

    # --- listing, eviction ---------------------------------------------------------------------
    def entries(self) -> list[Entry]:
        """Every entry rwb wrote, most recently used first (one whose sidecar is damaged is
        listed with its ``problem``). Other files and folders are not entries."""
        if not self.root.is_dir():
            return []
        out = []
        for folder in self.root.iterdir():
            if not folder.is_dir() or folder.is_symlink():
                continue
            meta, _ = _read_sidecar(folder)
            if meta is None:
                continue
            try:
                size = sum(p.stat().st_size for p in folder.rglob("*")
                           if p.is_file() and not p.is_symlink())
                used = (folder / SIDECAR).stat().st_mtime
            except OSError:
                continue
            raw = meta.get("identity")
            ident: dict[str, Any] = raw if isinstance(raw, dict) else {}
            problem = ""
            build_s: float | None = None
            threads: int | None = None
            try:
                build_s = None if meta.get("build_s") is None else float(meta["build_s"])
                threads = None if meta.get("build_threads") is None else int(
                    meta["build_threads"])
            except (TypeError, ValueError):
                problem = f"corrupt {SIDECAR} (build_s / build_threads not numbers)"
            out.append(Entry(folder.name, str(ident.get("kind", "?")), folder, size, used,
                             ident, build_s, threads, str(meta.get("created", "")), problem))
        return sorted(out, key=lambda e: -e.last_used)

    def total_bytes(self) -> int:
        return sum(e.bytes for e in self.entries())

    def _clean_tmp(self, older_than_s: float) -> None:
        """Remove rwb's temporary folders (marker inside) older than ``older_than_s``."""
        now = time.time()
        for tmp in [*self.root.glob(_TMP_PREFIX + "*"), *self.root.glob(_TRASH_PREFIX + "*")]:
            try:
                if now - tmp.stat().st_mtime >= older_than_s and _mine_tmp(tmp):
                    shutil.rmtree(tmp, ignore_errors=True)
            except OSError:
                pass

    def evict(self, keep: str | None = None) -> list[str]:
        """Remove least recently used entries (rwb's only) until they fit the limit (never
        ``keep``), and rwb's temporary folders left by writers that died; returns the removed
        keys."""
        removed: list[str] = []
        if not self.root.is_dir():
            return removed
        self._clean_tmp(_STALE_TMP_S)
        entries = self.entries()
        total = sum(e.bytes for e in entries)
        for e in reversed(entries):  # oldest first
            if total <= self.max_bytes:
                break
            if e.key == keep:
                continue
            failed = _remove(e.path)
            if failed:
                log.warning("index cache: could not evict %s (%s)", e.key, failed)
                continue
            total -= e.bytes
            removed.append(e.key)
            log.info("index cache: evicted %s (%d bytes, least recently used)", e.key, e.bytes)
        return removed

    def clear(self) -> Cleared:
        """Remove every entry rwb wrote (nothing else); what was removed and what could not
        be."""
        entries = self.entries()
        removed, size, failed = 0, 0, []
        for e in entries:
            why = _remove(e.path)
            if why:
                failed.append((e.key, why))
            else:
                removed, size = removed + 1, size + e.bytes
        if self.root.is_dir():
            self._clean_tmp(0.0 if not failed else _STALE_TMP_S)
        return Cleared(removed, size, tuple(failed))


def _plain(extra: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in extra.items() if isinstance(v, str | int | float | bool) or v is None}


def build_or_load(
    cache: IndexCache | None,
    index: IndexBackend,
    vectors: np.ndarray,
    ids: np.ndarray | None = None,
    *,
    data: str | None = None,
    reproducible: bool | None = None,
) -> tuple[BuildInfo, Outcome]:
    """``index.build(vectors, ids)``, or the cached build of the same identity loaded into
    ``index``. ``data``: a fingerprint of ``vectors`` (e.g. the dataset's) to skip hashing
    them. ``reproducible``: take only a cached build made with one thread (default: when this
    index builds with one thread). The returned BuildInfo carries the original build time
    either way."""
    threads = index.build_threads if isinstance(index, SupportsBuildThreads) else index.threads
    if cache is None or not cache.enabled or not isinstance(index, SupportsSnapshot):
        why = "cache disabled" if cache is None or not cache.enabled else (
            f"backend '{index.name}' has no snapshot format")
        info = index.build(vectors, ids)
        return info, Outcome("off", info.build_s, note=why)
    ident = index_identity(index, len(vectors), data or array_digest(vectors), ids)
    strict = threads == 1 if reproducible is None else reproducible
    got = cache.fetch(index, ident, reproducible=strict)
    if got is not None:
        return got
    info = index.build(vectors, ids)
    key = cache.store(index, ident, info, threads)
    return info, Outcome("miss", info.build_s, None, key or _key_of(ident), key is not None)
