"""Where rwb looks for data, dataset manifests and its cache (env vars override).

Nothing here assumes a source checkout: installed from a wheel, the manifests are the package
data ``retrieval/_manifests`` (built from the top-level ``datasets/`` folder, see
pyproject.toml) and the data folder defaults to ``$XDG_DATA_HOME/rwb/data``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from retrieval.errors import ConfigError

#: the installed (or checked-out) ``retrieval`` package folder
PACKAGE_DIR = Path(__file__).resolve().parent
#: the folder above the package: the checkout root when rwb runs from one (tests and benchmarks
#: use it for sweeps/ and notebooks/); library code asks :func:`checkout_root` instead
REPO_ROOT = PACKAGE_DIR.parent
#: the manifests shipped inside the wheel (``retrieval._manifests``)
PACKAGED_MANIFESTS = PACKAGE_DIR / "_manifests"


def checkout_root() -> Path | None:
    """The source checkout rwb runs from (editable install, PYTHONPATH), or None when it runs
    installed (the package folder's parent is then site-packages, not a checkout)."""
    root = PACKAGE_DIR.parent
    if (root / "pyproject.toml").is_file() and (root / "datasets").is_dir():
        return root
    return None


def _default_data_dir() -> Path:
    root = checkout_root()
    if root is not None:
        return (root.parent / "shared" / "data").resolve()
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / "rwb" / "data"


def _env_data_dir() -> Path | None:
    """$RWB_DATA_DIR as a folder; None when unset. Set to something that is not an existing
    folder is a ConfigError naming the variable (never a silent fall-back)."""
    env = os.environ.get("RWB_DATA_DIR")
    if not env:
        return None
    path = Path(env).expanduser()
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "does not exist"
        raise ConfigError(f"environment variable RWB_DATA_DIR: '{env}' {what}; set it to the "
                          f"folder holding the shared datasets, or unset it")
    return path


def data_dir() -> Path:
    """Folder with the shared public datasets: $RWB_DATA_DIR, else ``<checkout>/../shared/data``
    (installed: ``$XDG_DATA_HOME/rwb/data``, default ``~/.local/share/rwb/data``)."""
    env = _env_data_dir()
    if env is not None:
        return env
    return _default_data_dir()


def data_dir_candidates() -> list[Path]:
    """Every place data is looked for, in order (for error messages and ``rwb datasets``)."""
    out = []
    env = _env_data_dir()
    if env is not None:
        out.append(env)
    out.append(_default_data_dir())
    return out


def _env_manifest_dirs() -> list[Path]:
    """$RWB_DATASETS_DIR as a list of folders (``os.pathsep``-separated; empty entries are
    skipped). An entry that is not an existing folder is a ConfigError naming the variable and
    the entry (never silently skipped)."""
    env = os.environ.get("RWB_DATASETS_DIR")
    if not env:
        return []
    out: list[Path] = []
    for entry in env.split(os.pathsep):
        if not entry.strip():
            continue
        path = Path(entry).expanduser()
        if not path.is_dir():
            what = "is not a folder" if path.exists() else "does not exist"
            shown = f"'{env}'" if entry == env else f"entry '{entry}' of '{env}'"
            raise ConfigError(f"environment variable RWB_DATASETS_DIR: {shown} {what}; set it "
                              f"to folders of dataset manifests (separated by "
                              f"'{os.pathsep}'), or unset it")
        out.append(path)
    return out


def builtin_manifests_dir() -> Path:
    """The built-in manifests: the checkout's ``datasets/`` folder, else (rwb installed from a
    wheel) the same files shipped as package data."""
    root = checkout_root()
    return root / "datasets" if root is not None else PACKAGED_MANIFESTS


def manifests_dirs() -> list[Path]:
    """Every folder searched for dataset manifests, in order: the folders of
    $RWB_DATASETS_DIR (``os.pathsep`` list), then the built-in ones. A name found in an
    earlier folder shadows the same name in a later one."""
    out = _env_manifest_dirs()
    builtin = builtin_manifests_dir()
    if builtin not in out:
        out.append(builtin)
    return out


def manifests_dir() -> Path:
    """The first folder searched for manifests (see :func:`manifests_dirs` for all of them):
    the first of $RWB_DATASETS_DIR, else the built-in folder."""
    return manifests_dirs()[0]


def cache_dir() -> Path:
    """On-disk cache (ground truth, embeddings, built indexes): $RWB_CACHE_DIR or ~/.cache/rwb."""
    env = os.environ.get("RWB_CACHE_DIR")
    path = Path(env).expanduser() if env else Path.home() / ".cache" / "rwb"
    path.mkdir(parents=True, exist_ok=True)
    return path


def spec_base_dir(source: str) -> Path:
    """The folder a spec's relative file paths resolve against: the spec file's own folder
    when ``source`` names a file, else the current directory (an in-memory spec)."""
    p = Path(source)
    return p.parent.resolve() if p.is_file() else Path.cwd()


def resolve_spec_path(value: str, source: str) -> str:
    """``value`` (``~`` expanded) made absolute by the one rule of every spec (sweep, churn,
    load, rerank, cache): relative to the current directory, where users run rwb from their
    data folder. The rule rerank and cache specs had (the spec file's folder,
    :func:`spec_base_dir`) is still accepted, with a warning, where only it finds the file."""
    p = Path(value).expanduser()
    if p.is_absolute():
        return str(p)
    new = (Path.cwd() / p).resolve()
    old = (spec_base_dir(source) / p).resolve()
    if old == new or new.exists() or not old.exists():
        return str(new)
    logging.getLogger(__name__).warning(
        "%s: '%s' found relative to the spec's folder (%s), not to the working directory "
        "(%s), the rule of every spec: write it relative to where rwb runs, or absolute",
        source, value, old, new)
    return str(old)


#: the marker file inside a temporary folder rwb made (:func:`rwb_tempdir`): its pid
TEMP_MARK = ".rwb-temp"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def clean_stale_tempdirs(prefix: str, parent: Path | None = None) -> int:
    """Remove ``<tmp>/<prefix>*`` folders left by an rwb process that was killed (kill -9):
    only those holding rwb's :data:`TEMP_MARK` whose recorded process is gone; a folder without
    the marker is never touched. Returns how many were removed."""
    root = Path(parent or tempfile.gettempdir())
    removed = 0
    for d in root.glob(f"{prefix}*"):
        mark = d / TEMP_MARK
        try:
            if d.is_symlink() or not d.is_dir() or not mark.is_file():
                continue
            pid = int(mark.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if pid != os.getpid() and not _alive(pid):
            shutil.rmtree(d, ignore_errors=True)
            removed += 1
    if removed:
        logging.getLogger(__name__).info("removed %d stale %s* folders of killed rwb runs",
                                         removed, prefix)
    return removed


@contextlib.contextmanager
def rwb_tempdir(prefix: str) -> Iterator[Path]:
    """A temporary folder (``tempfile.TemporaryDirectory(prefix=prefix)``) marked as rwb's
    (:data:`TEMP_MARK`, this process's pid), removed at exit; stale ones of killed runs with the
    same prefix are removed first (:func:`clean_stale_tempdirs`)."""
    clean_stale_tempdirs(prefix)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        (Path(tmp) / TEMP_MARK).write_text(f"{os.getpid()}\n")
        yield Path(tmp)
