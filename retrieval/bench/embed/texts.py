"""The texts ``rwb bench embed`` measures: a seeded sample of a catalog text collection (or a
mix of three), or the lines of a UTF-8 file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bench.embed.spec import EmbedBenchConfig
from retrieval.errors import DataError, param_error

#: short collection names accepted besides the catalog's own
ALIASES = {"qqp": "qqp-questions", "reuters-paragraphs": "reuters"}
MIXED = "mixed"
MIXED_PARTS = ("qqp-questions", "reuters", "scifact")


def load_bench_texts(cfg: EmbedBenchConfig) -> tuple[list[str], dict[str, Any]]:
    """The texts to embed (seeded sample, in arrival order) and where they came from."""
    if cfg.texts_file is not None:
        return _texts_from_file(Path(cfg.texts_file), cfg.sample)
    from retrieval.loaders.catalog import load_text_collection

    rng = np.random.default_rng(cfg.seed)
    name = ALIASES.get(cfg.collection, cfg.collection)
    parts = MIXED_PARTS if name == MIXED else (name,)
    texts: list[str] = []
    sources = {}
    for i, part in enumerate(parts):
        n = cfg.sample // len(parts) + (1 if i < cfg.sample % len(parts) else 0)
        coll = load_text_collection(part)
        pool = [t for t in coll.corpus.values() if t.strip()]
        if n > len(pool):
            raise param_error(
                "sample", f"<= {len(pool) * len(parts)} (non-empty texts in '{part}'"
                f"{' times ' + str(len(parts)) if len(parts) > 1 else ''})", cfg.sample,
                where="bench embed",
            )
        pick = rng.permutation(len(pool))[:n]
        texts.extend(pool[j] for j in pick)
        sources[part] = {"n": n, "of": len(pool), "fingerprint": coll.fingerprint}
    if len(parts) > 1:
        order = rng.permutation(len(texts))
        texts = [texts[j] for j in order]
    return texts, {"collection": name, "sample": len(texts), "seed": cfg.seed, "parts": sources}


def _texts_from_file(path: Path, sample: int) -> tuple[list[str], dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"texts file '{path}' does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"texts file '{path}' cannot be read as UTF-8 ({exc})") from None
    if not lines:
        raise DataError(f"texts file '{path}' is empty; expected one text per line")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            raise DataError(f"texts file '{path}': line {i} is empty; every line must be a text")
    texts = lines[:sample]
    return texts, {"collection": f"file:{path}", "sample": len(texts), "lines": len(lines)}


__all__ = ["ALIASES", "MIXED", "MIXED_PARTS", "load_bench_texts"]
