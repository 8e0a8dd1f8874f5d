"""An engine's own hybrid search and sparse index, as hooks of its descriptor (plain data only).

A hybrid fusion is written as ``method`` (``rrf`` / ``convex``) and ``params`` (the plain data of
:meth:`retrieval.fusion_tune.fuse.Candidate.params`: ``weights`` and ``depths`` keyed by leg,
RRF ``k`` or the ``normalisation``). An engine that runs hybrid search registers a
:class:`HybridSearch` on its :class:`~retrieval.indexes.engine.EngineDescriptor` (``hybrid=``):

- ``expressible(method, params)``: whether the engine's own fusion computes exactly this order;
- ``form(method, params, dense_metric)``: the engine's own hybrid-search arguments (the
  ``hybrid`` block of an export; keys are users' contract: do not rename);
- ``run(form, collection, workdir)``: loads that block with the engine's own client on a
  :class:`HybridCollection` built under ``workdir`` and returns each query's fused top
  ``form['limit']`` corpus positions (used by tests; None where not written);
- ``refused``: why rwb writes no export for this engine (one line), when it cannot (the
  engine's hybrid command is not available to test here); None otherwise.

An engine that holds BM25 weights in a sparse vector index registers ``sparse=`` (a
:data:`SparseFactory`): ``factory(workdir)`` gives a :class:`SparseIndex`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

#: one sparse vector: term id -> weight (a document: BM25 weight per term; a query: count)
Sparse = Mapping[int, float]


@dataclass(frozen=True, eq=False)
class HybridCollection:
    """A collection as an engine holds it for hybrid search (positions are corpus positions).

    ``keep``: the positions indexed (blank documents are not); ``dense`` float32 ``(n, dim)``
    embeddings (rows of ``keep`` used); ``sparse``: each document's BM25 weight per term;
    ``texts``: the documents; ``query_dense`` float32 ``(nq, dim)``; ``query_sparse``: each
    query's token counts; ``query_texts``: the queries."""

    keep: Sequence[int]
    dense: np.ndarray
    sparse: Sequence[Sparse]
    texts: Sequence[str]
    query_dense: np.ndarray
    query_sparse: Sequence[Sparse]
    query_texts: Sequence[str]

    def bm25_scores(self, i: int) -> np.ndarray:
        """Query ``i``'s BM25 score of every document (the sparse inner product)."""
        q = self.query_sparse[i]
        return np.array([sum(c * d.get(t, 0.0) for t, c in q.items()) for d in self.sparse])


Expressible = Callable[[str, Mapping[str, Any]], bool]
HybridForm = Callable[[str, Mapping[str, Any], str], dict[str, Any]]
HybridRun = Callable[[Mapping[str, Any], HybridCollection, Path], list[list[int]]]


@dataclass(frozen=True)
class HybridSearch:
    """An engine's own hybrid search (see the module docstring)."""

    expressible: Expressible
    form: HybridForm
    run: HybridRun | None = None
    refused: str | None = None


class SparseIndex(Protocol):
    """A sparse vector index in an engine: inner-product search over term weights."""

    def add(self, docs: Sequence[Sparse]) -> None:
        """Index ``docs`` under their positions (0..n-1); an empty vector is not indexed."""

    def search(self, query: Sparse, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions int64, inner products float64) of the top ``k``, best first (exact)."""
        ...

    def close(self) -> None: ...


SparseFactory = Callable[[Path], SparseIndex]


def equal_weights(params: Mapping[str, Any]) -> bool:
    """Every leg has the same positive weight."""
    w = list(dict(params.get("weights") or {}).values())
    return bool(w) and len(set(w)) == 1 and float(w[0]) > 0


__all__ = ["Expressible", "HybridCollection", "HybridForm", "HybridRun", "HybridSearch",
           "Sparse", "SparseFactory", "SparseIndex", "equal_weights"]
