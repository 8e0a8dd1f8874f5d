"""The sparse leg of a fusion: the BM25 weights held in an engine's own sparse vector index.

Each document's sparse vector is bm25s' per-term BM25 weight (the run's idf, k1, b: the
``bm25`` leg's convention); a query's is the count of each of its tokens; the engine ranks by the
inner product, which is the BM25 score (so, up to float32 rounding and tie order, the sparse leg
ranks as the ``bm25`` leg does, but its cost is the engine's). The engine is named in the spec
(``sparse: {engine: qdrant}``) and reached through its descriptor's ``sparse`` hook.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.indexes.engine import sparse_engines
from retrieval.indexes.hybrid import SparseIndex
from retrieval.rerank.bm25 import BM25Index
from retrieval.rerank.firststage import Candidates
from retrieval.timing import time_each

log = logging.getLogger(__name__)


class SparseStage:
    """A first stage over ``engine``'s sparse index of ``bm25``'s weights (built, searched,
    timed like the other legs; :meth:`close` removes the folder it created)."""

    def __init__(self, engine: str, bm25: BM25Index) -> None:
        self.engine = engine
        self.bm25 = bm25
        self.name = f"sparse:{engine}"
        self._dir = Path(tempfile.mkdtemp(prefix="rwb-sparse-"))
        self._index: SparseIndex | None = None
        self.build_s = 0.0

    def build(self) -> None:
        t0 = time.perf_counter()
        self._index = sparse_engines()[self.engine](self._dir)
        self._index.add(self.bm25.doc_weights())
        self.build_s = time.perf_counter() - t0
        log.info("sparse leg (%s): %d docs indexed in %.2f s", self.engine, self.bm25.n_docs,
                 self.build_s)

    def _one(self, terms: dict[int, float], k: int) -> tuple[np.ndarray, np.ndarray]:
        assert self._index is not None, "build() first"
        ids, sc = self._index.search(terms, k)
        keep = sc > 0  # as the bm25 leg: a document sharing no term is not a candidate
        return ids[keep], sc[keep]

    def search(self, queries: Sequence[str], k: int) -> Candidates:
        """Top ``k`` of every query: (positions, inner products = BM25 scores), -1 / -inf pad."""
        terms = self.bm25.query_terms(queries)
        ids = np.full((len(terms), k), -1, dtype=np.int64)
        out = np.full((len(terms), k), -np.inf, dtype=np.float32)
        for i, t in enumerate(terms):
            got, sc = self._one(t, k)
            ids[i, : len(got)] = got
            out[i, : len(got)] = sc
        return Candidates(doc_idx=ids, scores=out)

    def time_queries(self, queries: Sequence[str], k: int) -> np.ndarray:
        """Milliseconds of single-query calls (tokenising the query included)."""
        _, ms = time_each(lambda q: self.search([q], k), list(queries))
        return np.asarray(ms)

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        shutil.rmtree(self._dir, ignore_errors=True)  # the folder this stage created


__all__ = ["SparseStage"]
