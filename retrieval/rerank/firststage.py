"""First stages over a text corpus: BM25 and dense (an Embedder + any index adapter).

Both return :class:`Candidates`: per query, document positions in corpus order with
*similarities* (higher is better): the BM25 score (>= 0), or for dense retrieval the index's
distance turned back into a similarity - cosine similarity ``1 - cosine distance`` (-1..1) for
``metric: cosine``, the inner product for ``ip``, minus the squared L2 distance for ``l2``.

``search`` runs all queries in one batch (for quality); ``time_queries`` runs them one at a time
and records each call's wall time in milliseconds (single-query latency, timed by
:func:`retrieval.timing.time_each`: ``perf_counter_ns``, garbage collector paused).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from retrieval.data import Metric, check_metric
from retrieval.embed import CachedEmbedder, Embedder
from retrieval.errors import DataError, param_error
from retrieval.indexes import create_index
from retrieval.indexes.engine import backend_for
from retrieval.rerank.bm25 import BM25Index, BM25Params
from retrieval.timing import time_each

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Candidates:
    """Ranked candidates of one first stage.

    ``doc_idx`` int64 ``(nq, k)``: positions in the corpus order, -1 = no result (row tails);
    ``scores`` float32 ``(nq, k)``: similarity, higher is better, -inf where -1.
    """

    doc_idx: np.ndarray
    scores: np.ndarray

    @property
    def k(self) -> int:
        return int(self.doc_idx.shape[1])

    def row(self, i: int, depth: int | None = None) -> np.ndarray:
        """Valid doc positions of query ``i`` (best first), at most ``depth``."""
        r = self.doc_idx[i] if depth is None else self.doc_idx[i, :depth]
        return r[r >= 0]

    def rankings(
        self, query_ids: Sequence[str], corpus_ids: Sequence[str], depth: int | None = None
    ) -> dict[str, list[str]]:
        """Query id -> doc ids, best first (what :mod:`retrieval.stats.irmetrics` evaluates)."""
        return {
            qid: [corpus_ids[j] for j in self.row(i, depth)] for i, qid in enumerate(query_ids)
        }

    def top1(self) -> np.ndarray:
        """Similarity of each query's best candidate (float64; -inf when there is none)."""
        return self.scores[:, 0].astype(np.float64)


class FirstStage(Protocol):
    name: str

    def build(self, corpus: Sequence[str]) -> None: ...

    def search(self, queries: Sequence[str], k: int) -> Candidates: ...

    def time_queries(self, queries: Sequence[str], k: int) -> tuple[Candidates, np.ndarray]: ...


def _stack(rows: list[Candidates]) -> Candidates:
    return Candidates(
        doc_idx=np.concatenate([r.doc_idx for r in rows]),
        scores=np.concatenate([r.scores for r in rows]),
    )


class BM25Stage:
    """BM25 over the corpus (see :mod:`retrieval.rerank.bm25` for the pinned convention)."""

    def __init__(self, params: BM25Params | None = None) -> None:
        self.params = params or BM25Params()
        self.index = BM25Index(self.params)
        self.name = f"bm25:{self.params.implementation}"

    def build(self, corpus: Sequence[str]) -> None:
        self.index.build(corpus)

    def search(self, queries: Sequence[str], k: int) -> Candidates:
        hits = self.index.search(queries, k)
        return Candidates(doc_idx=hits.doc_idx, scores=hits.scores)

    def time_queries(self, queries: Sequence[str], k: int) -> tuple[Candidates, np.ndarray]:
        rows, ms = time_each(lambda q: self.search([q], k), list(queries))
        return _stack(rows), ms


def distances_to_similarity(distances: np.ndarray, metric: Metric) -> np.ndarray:
    """rwb distances (lower is closer) -> similarity (higher is closer); inf -> -inf."""
    d = np.asarray(distances, dtype=np.float32)
    sim = 1.0 - d if metric == "cosine" else -d
    return np.where(np.isfinite(d), sim, -np.inf).astype(np.float32)


class DenseStage:
    """Embed the corpus once, index it with any adapter, search with embedded queries.

    ``embedder`` embeds the corpus and the batch of queries (a :class:`CachedEmbedder` makes
    reruns cheap); ``query_embedder`` embeds single queries when timing (default: the embedder
    behind the cache, so a timed query is really encoded and never written to the cache).
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        backend: str | None = None,
        metric: Metric = "cosine",
        build_params: dict[str, Any] | None = None,
        search_params: dict[str, Any] | None = None,
        batch_size: int = 32,
        query_embedder: Embedder | None = None,
    ) -> None:
        self.embedder = embedder
        self.query_embedder = query_embedder or (
            embedder.inner if isinstance(embedder, CachedEmbedder) else embedder
        )
        backend = backend or backend_for("exact")  # exact search unless told
        self.backend = backend
        self.metric = check_metric(metric, where="dense first stage")
        self.build_params = dict(build_params or {})
        self.search_params = dict(search_params or {})
        self.batch_size = batch_size
        self.index: Any = None
        #: vectors of the indexed (non-blank) documents and their corpus positions
        self.corpus_vectors: np.ndarray | None = None
        self.corpus_positions: np.ndarray | None = None
        self.name = f"dense:{backend}:{embedder.model_id}"

    def build(self, corpus: Sequence[str]) -> None:
        """Embed and index the corpus. Blank documents are left out of the index (they have no
        text to embed) and so are never returned; ids stay corpus positions."""
        texts = list(corpus)
        positions = np.array([i for i, t in enumerate(texts) if t.strip()], dtype=np.int64)
        if positions.size == 0:
            raise DataError("dense first stage: corpus has no non-blank document")
        if positions.size < len(texts):
            log.info("dense first stage: %d blank documents not indexed",
                     len(texts) - positions.size)
        vectors = self.embedder.embed([texts[i] for i in positions], batch_size=self.batch_size)
        index = create_index(self.backend, int(vectors.shape[1]), self.metric, self.build_params)
        index.build(vectors, positions)
        if self.search_params:
            index.set_search_params(**self.search_params)
        self.index = index
        self.corpus_vectors = vectors
        self.corpus_positions = positions

    def search_vectors(self, q: np.ndarray, k: int) -> Candidates:
        """Top ``k`` of query vectors ``q`` (already embedded) with the current search params."""
        if self.index is None:
            raise DataError("dense first stage: search() called before build()")
        res = self.index.search(q, k)
        return Candidates(
            doc_idx=np.asarray(res.ids, dtype=np.int64),
            scores=distances_to_similarity(res.distances, self.metric),
        )

    def search(self, queries: Sequence[str], k: int) -> Candidates:
        _check_k(k)
        q = self.embedder.embed(list(queries), batch_size=self.batch_size)
        return self.search_vectors(q, k)

    def time_queries(self, queries: Sequence[str], k: int) -> tuple[Candidates, np.ndarray]:
        """Each query embedded (by ``query_embedder``) and searched alone, timed together."""
        _check_k(k)

        def one(q: str) -> Candidates:
            return self.search_vectors(self.query_embedder.embed([q], batch_size=1), k)

        rows, ms = time_each(one, list(queries))
        return _stack(rows), ms

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise param_error("k", "an integer >= 1", k, where="first stage search")


__all__ = ["BM25Stage", "Candidates", "DenseStage", "FirstStage", "distances_to_similarity"]
