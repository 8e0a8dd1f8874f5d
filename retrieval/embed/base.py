"""The Embedder protocol (texts -> float32 ``(n, dim)``), its optional cache-tag ability, the
input checks every embedder applies and the dtypes an embedder may compute in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from retrieval.errors import DataError, param_error

Dtype = Literal["fp32", "bf16", "fp16"]
DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16")


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
