"""Text collections turned into vector datasets with an Embedder (cached on disk).

Queries come from the collection's own queries when it has them; otherwise a seeded sample of
the corpus is held out as queries and removed from the base. Embeddings go through
:class:`retrieval.embed.CachedEmbedder`, so the second load costs a hash and a file read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.data import Metric, TextCollection, VectorDataset, check_metric, normalize_rows
from retrieval.embed import Embedder, get_embedder
from retrieval.errors import ConfigError, param_error
from retrieval.timing import timed

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class TextDataset:
    """A vector dataset made from a text collection, with the text ids of every row.

    ``base_ids[i]`` is the corpus id of ``dataset.base[i]``; ``query_ids[j]`` the id of query
    ``j`` (a query id of the collection, or a corpus id when queries were held out).
    """

    dataset: VectorDataset
    collection: TextCollection
    base_ids: tuple[str, ...]
    query_ids: tuple[str, ...]
    queries_held_out: bool


def _sample(rng: np.random.Generator, n: int, k: int | None) -> np.ndarray:
    """Sorted sample of ``k`` of ``range(n)`` (all when k is None or >= n)."""
    if k is None or k >= n:
        return np.arange(n)
    return np.sort(rng.choice(n, size=k, replace=False))


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1)
    return x if np.allclose(norms, 1.0, atol=1e-4) else normalize_rows(x)


def _corpus_texts(coll: TextCollection, dedupe: bool) -> tuple[list[str], list[str], int, int]:
    """(ids, texts, blank texts dropped, duplicates dropped) of the corpus, in collection order:
    blank texts always dropped, exact duplicate texts too with ``dedupe`` (first kept)."""
    seen: set[str] = set()
    ids: list[str] = []
    texts: list[str] = []
    n_blank = n_dup = 0
    for doc_id, text in coll.corpus.items():
        if not text.strip():
            n_blank += 1
            continue
        if dedupe:
            if text in seen:
                n_dup += 1
                continue
            seen.add(text)
        ids.append(doc_id)
        texts.append(text)
    return ids, texts, n_blank, n_dup


def _split_queries(
    coll: TextCollection, ids: list[str], texts: list[str], n_queries: int | None,
    rng: np.random.Generator, where: str,
) -> tuple[list[str], list[str], list[str], list[str]]:
    """(query ids, query texts, pool ids, pool texts): the collection's queries (seeded sample
    of ``n_queries``) over the whole corpus, or, when it has none, ``n_queries`` corpus texts
    held out as queries and removed from the pool."""
    if not coll.queries:
        if n_queries is None:
            raise param_error(
                "n_queries", "an integer >= 1 (collection "
                f"'{coll.name}' has no queries, so n_queries corpus texts are held out)",
                n_queries, where=where,
            )
        if n_queries >= len(texts):
            raise param_error(
                "n_queries", f"< the {len(texts)} corpus texts", n_queries, where=where
            )
        perm = rng.permutation(len(texts))
        q_idx = np.sort(perm[:n_queries])
        rest = np.sort(perm[n_queries:])
        return ([ids[i] for i in q_idx], [texts[i] for i in q_idx], [ids[i] for i in rest],
                [texts[i] for i in rest])
    all_q = [(q, t) for q, t in coll.queries.items() if t.strip()]
    if n_queries is not None and n_queries > len(all_q):
        raise param_error(
            "n_queries", f"<= the {len(all_q)} queries of '{coll.name}'", n_queries,
            where=where,
        )
    pick = _sample(rng, len(all_q), n_queries)
    return [all_q[i][0] for i in pick], [all_q[i][1] for i in pick], ids, texts


def embed_collection(
    coll: TextCollection,
    *,
    name: str,
    n_queries: int | None = None,
    n_base: int | None = None,
    metric: Metric = "cosine",
    seed: int = 0,
    dedupe: bool = True,
    model: str | Path | None = None,
    embedder: Embedder | None = None,
    batch_size: int = 32,
    where: str = "text dataset",
) -> TextDataset:
    """Embed a collection into a :class:`VectorDataset` (see the module docstring).

    ``n_queries``: number of queries (None = all the collection's queries; required when the
    collection has none). ``n_base``: cap on base vectors (seeded sample, collection order kept).
    ``dedupe`` drops exact duplicate corpus texts (first kept). Blank texts are always dropped.
    Cosine datasets are L2-normalised.
    """
    metric = check_metric(metric, where=where)
    rng = np.random.default_rng(seed)
    ids, texts, n_blank, n_dup = _corpus_texts(coll, dedupe)
    held_out = not coll.queries
    q_ids, q_texts, pool_ids, pool_texts = _split_queries(coll, ids, texts, n_queries, rng,
                                                          where)
    b_idx = _sample(rng, len(pool_texts), n_base)
    base_ids = [pool_ids[i] for i in b_idx]
    base_texts = [pool_texts[i] for i in b_idx]
    if not base_texts:
        raise ConfigError(f"{where}: no base texts left in collection '{coll.name}'")

    emb = embedder if embedder is not None else get_embedder(model)
    with timed(pause_gc=False) as sw:
        base = emb.embed(base_texts, batch_size=batch_size)
        queries = emb.embed(q_texts, batch_size=batch_size)
    embed_s = sw.s
    if metric == "cosine":  # the default MiniLM output is already unit-norm: no copy then
        base, queries = _unit_rows(base), _unit_rows(queries)
    log.info(
        "%s: %d base + %d queries embedded/loaded in %.2f s", name, len(base_texts),
        len(q_texts), embed_s,
    )
    info: dict[str, object] = {
        "collection": coll.name,
        "collection_source": coll.source,
        "model_id": emb.model_id,
        "n_corpus": len(coll.corpus),
        "n_base": len(base_texts),
        "n_queries": len(q_texts),
        "queries_from": "held-out corpus sample" if held_out else "collection queries",
        "seed": seed,
        "dedupe": dedupe,
        "n_duplicates_dropped": n_dup,
        "n_blank_dropped": n_blank,
        "embed_or_load_s": round(embed_s, 3),
    }
    for key in ("split", "min_chars"):
        if key in coll.info:
            info[key] = coll.info[key]
    ds = VectorDataset(
        name=name,
        base=base,
        queries=queries,
        metric=metric,
        source=f"text:{coll.name} embedded with {emb.model_id}",
        info=info,
    )
    return TextDataset(
        dataset=ds,
        collection=coll,
        base_ids=tuple(base_ids),
        query_ids=tuple(q_ids),
        queries_held_out=held_out,
    )
