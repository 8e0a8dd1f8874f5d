"""Where rwb looks for data, dataset manifests and its cache (env vars override)."""

from __future__ import annotations

import os
from pathlib import Path

from retrieval.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[1]


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
    """Folder with the shared public datasets: $RWB_DATA_DIR, else ``<repo>/../shared/data``."""
    env = _env_data_dir()
    if env is not None:
        return env
    return (REPO_ROOT.parent / "shared" / "data").resolve()


def data_dir_candidates() -> list[Path]:
    """Every place data is looked for, in order (for error messages and ``rwb datasets``)."""
    out = []
    env = _env_data_dir()
    if env is not None:
        out.append(env)
    out.append((REPO_ROOT.parent / "shared" / "data").resolve())
    return out


def manifests_dir() -> Path:
    """Dataset manifests: $RWB_DATASETS_DIR, else ``<repo>/datasets``."""
    env = os.environ.get("RWB_DATASETS_DIR")
    return Path(env).expanduser() if env else REPO_ROOT / "datasets"


def cache_dir() -> Path:
    """On-disk cache (ground truth, embeddings, built indexes): $RWB_CACHE_DIR or ~/.cache/rwb."""
    env = os.environ.get("RWB_CACHE_DIR")
    path = Path(env).expanduser() if env else Path.home() / ".cache" / "rwb"
    path.mkdir(parents=True, exist_ok=True)
    return path
