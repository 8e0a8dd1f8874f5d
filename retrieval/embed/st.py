"""The embedders: a sentence-transformers model (torch, fp32 / bf16 / fp16) and the same model on
ONNX Runtime / OpenVINO (:class:`RuntimeEmbedder`, exported once by
:mod:`retrieval.embed.runtimes`); :func:`make_embedder` picks one by runtime name."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embed.base import DTYPES, Dtype, check_batch_size, check_texts
from retrieval.embed.models import _set_offline, resolve_model
from retrieval.errors import DataError, param_error

log = logging.getLogger(__name__)

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
