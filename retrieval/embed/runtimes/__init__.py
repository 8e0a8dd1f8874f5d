"""Embedding runtimes: the same sentence-transformers model run through torch (fp32, bf16),
ONNX Runtime (fp32, dynamic int8) and OpenVINO (fp32, from the ONNX export).

Roles: :mod:`.names` (the runtime names, one parser), :mod:`.export` (the ONNX export and its
int8 quantization, cached on disk under ``cache_dir()/onnx`` keyed by model + runtime + library
versions, verified by sha256 before use), :mod:`.session` (an inference session over an
exported file: tokens in, unit-norm sentence embeddings out). The Embedder that uses them is
:class:`retrieval.embed.RuntimeEmbedder`.
"""

from retrieval.embed.runtimes.names import (
    DEFAULT_RUNTIME,
    RUNTIMES,
    Runtime,
    parse_runtime,
    parse_runtimes,
)

__all__ = ["DEFAULT_RUNTIME", "RUNTIMES", "Runtime", "parse_runtime", "parse_runtimes"]
