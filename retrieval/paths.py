"""Where rwb looks for data, dataset manifests and its cache (env vars override)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """Folder with the shared public datasets: $RWB_DATA_DIR, else ``<repo>/../shared/data``."""
    env = os.environ.get("RWB_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return (REPO_ROOT.parent / "shared" / "data").resolve()


def data_dir_candidates() -> list[Path]:
    """Every place data is looked for, in order (for error messages and ``rwb datasets``)."""
    out = []
    env = os.environ.get("RWB_DATA_DIR")
    if env:
        out.append(Path(env).expanduser())
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
