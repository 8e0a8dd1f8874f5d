"""The ONNX export of a sentence-transformers model folder, and its dynamic int8 quantization,
cached on disk.

An entry is a folder ``<cache>/onnx/<model>-<kind>-<key>/`` holding the ``.onnx`` file and
``rwb-export.json`` (model id, kind, the library versions that made it, size and sha256 of the
file). ``key`` is the sha256 of (format, model id, kind, versions), so a new torch / optimum /
onnxruntime version makes a new entry instead of reusing an old one. An entry is trusted only
when its manifest matches and the file's size and sha256 match; otherwise it is rebuilt with a
warning. Writes go to a temporary folder renamed into place (a crash leaves no half entry).

fp32 (``onnx-fp32``): ``optimum.exporters.onnx.main_export`` with ``library_name
="sentence_transformers"``: the graph includes the model's pooling and normalisation, so its
``sentence_embedding`` output is what ``SentenceTransformer.encode`` returns. int8
(``onnx-int8``): ``onnxruntime.quantization.quantize_dynamic`` of the fp32 file (weights int8
per output channel, activations quantized per call at run time: int8 results depend a little
on the batch a text travels in). Per tensor drifted 5x more here (1-cos mean 0.033 vs 0.006).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from retrieval.errors import BackendError, DataError

log = logging.getLogger(__name__)

FORMAT = "rwb-onnx-export-v1"
MANIFEST = "rwb-export.json"
FILES = {"onnx-fp32": "model.onnx", "onnx-int8": "model_int8.onnx"}
KINDS = tuple(FILES)
#: distributions whose versions key an entry (a change of any makes a new entry)
VERSIONED = ("torch", "transformers", "sentence-transformers", "optimum", "optimum-onnx", "onnx",
             "onnxruntime")
QUANTIZATION = {"method": "quantize_dynamic", "weight_type": "QInt8", "per_channel": True}


@dataclass(frozen=True)
class ExportInfo:
    """A usable exported file: ``path`` (the .onnx), ``reused`` (found in the cache, not made
    now), ``seconds`` spent making or verifying it."""

    path: Path
    kind: str
    key: str
    reused: bool
    seconds: float
    versions: dict[str, str] = field(default_factory=dict)


def versions() -> dict[str, str]:
    """Installed versions of the libraries that shape an export ("missing" where absent)."""
    out = {}
    for dist in VERSIONED:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def export_root(cache_root: Path | None = None) -> Path:
    """Where exports live: ``cache_root`` or ``retrieval.paths.cache_dir()/onnx``."""
    if cache_root is not None:
        return Path(cache_root)
    from retrieval.paths import cache_dir

    return cache_dir() / "onnx"


def entry_key(model_id: str, kind: str, vers: dict[str, str]) -> str:
    blob = json.dumps({"format": FORMAT, "model_id": model_id, "kind": kind, "versions": vers,
                       "quantization": QUANTIZATION if kind == "onnx-int8" else None},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_dir(root: Path, model_id: str, kind: str, key: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model_id).name or model_id)[:48]
    return root / f"{slug}-{kind}-{key[:16]}"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_entry(folder: Path, kind: str, key: str) -> str | None:
    """Why the entry in ``folder`` cannot be trusted (None: it can)."""
    man_path = folder / MANIFEST
    try:
        man = json.loads(man_path.read_text())
    except FileNotFoundError:
        return f"{MANIFEST} is missing"
    except (OSError, ValueError) as exc:
        return f"{MANIFEST} is unreadable ({exc})"
    if not isinstance(man, dict) or man.get("key") != key or man.get("kind") != kind:
        return f"{MANIFEST} names another model, kind or library versions"
    file = folder / FILES[kind]
    if not file.is_file():
        return f"{file.name} is missing"
    size = file.stat().st_size
    if size != man.get("size"):
        return f"{file.name} has {size} bytes, the manifest says {man.get('size')}"
    if sha256_file(file) != man.get("sha256"):
        return f"{file.name} does not match its sha256"
    return None


def exported_model(model_path: Path, model_id: str, kind: str, *,
                   cache_root: Path | None = None) -> ExportInfo:
    """The cached export of ``kind`` (``onnx-fp32`` | ``onnx-int8``) of the model folder
    ``model_path``: reused when its entry verifies, made (and cached) otherwise."""
    if kind not in FILES:
        raise DataError(f"onnx export: kind must be one of {', '.join(KINDS)}; received {kind!r}")
    t0 = time.perf_counter()
    vers = versions()
    for dist in ("onnxruntime", "optimum", "optimum-onnx", "onnx"):
        if vers[dist] == "missing":
            raise BackendError(
                f"onnx export: the package '{dist}' is not installed "
                f"(pip install 'retrieval-workbench[onnx]')"
            )
    root = export_root(cache_root)
    key = entry_key(model_id, kind, vers)
    folder = entry_dir(root, model_id, kind, key)
    if folder.exists():
        why = check_entry(folder, kind, key)
        if why is None:
            log.debug("onnx export cache hit: %s", folder)
            return ExportInfo(folder / FILES[kind], kind, key, True, time.perf_counter() - t0,
                              vers)
        log.warning("onnx export cache: entry %s cannot be trusted (%s); rebuilding it",
                    folder, why)
    source = None
    if kind == "onnx-int8":
        source = exported_model(model_path, model_id, "onnx-fp32", cache_root=cache_root)
    _build(folder, model_path, model_id, kind, key, vers, source)
    seconds = time.perf_counter() - t0
    log.info("onnx export: made %s for %s in %.1f s (cached in %s)", kind, model_id, seconds,
             folder)
    return ExportInfo(folder / FILES[kind], kind, key, False, seconds, vers)


def _build(folder: Path, model_path: Path, model_id: str, kind: str, key: str,
           vers: dict[str, str], source: ExportInfo | None) -> None:
    root = folder.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
    except OSError as exc:
        raise DataError(
            f"onnx export cache: cannot write to {root} ({exc.strerror or exc}); set "
            f"RWB_CACHE_DIR to a writable folder"
        ) from None
    try:
        out = tmp / FILES[kind]
        if source is None:
            _export_fp32(model_path, tmp)
        else:
            _quantize(source.path, out)
        if not out.is_file():
            raise BackendError(f"onnx export of {model_path} produced no {out.name}")
        man: dict[str, Any] = {
            "format": FORMAT, "key": key, "kind": kind, "model_id": model_id,
            "model_path": str(model_path), "versions": vers, "file": out.name,
            "size": out.stat().st_size, "sha256": sha256_file(out), "created": time.time(),
        }
        if source is not None:
            man["quantization"] = QUANTIZATION
            man["source_sha256"] = sha256_file(source.path)
        (tmp / MANIFEST).write_text(json.dumps(man, indent=2))
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:
            if check_entry(folder, kind, key) is None:  # another process won the race
                return
            raise
    except OSError as exc:
        raise DataError(
            f"onnx export cache: writing {folder} failed ({exc.strerror or exc}); free space or "
            f"set RWB_CACHE_DIR to a writable folder"
        ) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _export_fp32(model_path: Path, out_dir: Path) -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    from optimum.exporters.onnx import main_export

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            main_export(str(model_path), output=out_dir, task="feature-extraction",
                        library_name="sentence_transformers", device="cpu",
                        local_files_only=True, do_validation=False)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise BackendError(f"onnx export of {model_path} failed: {first}") from exc


def _quantize(src: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root_logger = logging.getLogger()
    was = root_logger.disabled
    root_logger.disabled = True  # it logs a "consider pre-processing" warning on the root logger
    try:
        quantize_dynamic(src, out, weight_type=QuantType.QInt8, per_channel=True)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BackendError(f"int8 quantization of {src} failed: {first}") from exc
    finally:
        root_logger.disabled = was


__all__ = ["FILES", "KINDS", "MANIFEST", "ExportInfo", "check_entry", "export_root",
           "exported_model", "sha256_file", "versions"]
