"""Qdrant's own hybrid search (prefetch + fusion query) and its sparse vector index holding BM25
weights, both through Qdrant's engine in process (``qdrant_edge``).

Export form (the ``hybrid`` block of ``rwb export RUN --engine qdrant``): ``prefetch`` (one per
leg: ``using`` the vector name, ``limit`` = the leg's depth) and ``query`` ``{fusion: rrf, k}``
(``Fusion.Rrf(k)``; Qdrant ranks from 0, so its ``k`` is rwb's ``k + 1``) or ``{fusion: dbsf}``
(``Fusion.Dbsf()``). Qdrant runs RRF and DBSF with equal weights only (its weighted RRF divides
the rank by the weight, ``1 / (k + rank / w)``, where rwb multiplies the contribution).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexes.hybrid import HybridCollection, HybridSearch, Sparse, equal_weights

#: the vector names of the collection an export expects
DENSE, SPARSE = "dense", "bm25"


def expressible(method: str, params: Mapping[str, Any]) -> bool:
    """RRF or DBSF, equal weights."""
    if method == "convex":
        return params.get("normalisation") == "dbsf" and equal_weights(params)
    return method == "rrf" and equal_weights(params)


def form(method: str, params: Mapping[str, Any], dense_metric: str) -> dict[str, Any]:
    """The prefetch + fusion query (plain data)."""
    query: dict[str, Any] = (
        {"fusion": "rrf", "k": int(params.get("k") or 0) + 1,
         "note": "Qdrant ranks from 0: its k is rwb's k + 1"}
        if method == "rrf" else {"fusion": "dbsf"})
    return {"call": "query_points(prefetch=[...], query=fusion, limit)",
            "prefetch": [{"using": DENSE if leg == "dense" else SPARSE, "limit": int(d)}
                         for leg, d in dict(params["depths"]).items()],
            "query": query, "limit": 10}


def _vector(v: Sparse) -> Any:
    import qdrant_edge as q

    return q.SparseVector(indices=[int(t) for t in v], values=[float(x) for x in v.values()])


def run(hybrid: Mapping[str, Any], coll: HybridCollection, workdir: Path) -> list[list[int]]:
    """Build an ``EdgeShard`` with a dense and a sparse (BM25 weights) vector per document and
    run the export's prefetch + fusion query for every query (exact prefetches)."""
    import qdrant_edge as q

    cfg = q.EdgeConfig(vectors={DENSE: q.EdgeVectorParams(size=int(coll.query_dense.shape[1]),
                                                          distance=q.Distance.Cosine)},
                       sparse_vectors={SPARSE: q.EdgeSparseVectorParams()})
    shard = q.EdgeShard.create(str(workdir / "qdrant-hybrid"), cfg)
    try:
        shard.update(q.UpdateOperation.upsert_points([
            q.Point(i, {DENSE: coll.dense[i].tolist(), SPARSE: _vector(coll.sparse[i])})
            for i in coll.keep]))
        query = hybrid["query"]
        fusion: Any = q.Fusion.Rrf(k=query["k"]) if query["fusion"] == "rrf" else q.Fusion.Dbsf()
        out = []
        for i in range(len(coll.query_texts)):
            vec = {DENSE: coll.query_dense[i].tolist(), SPARSE: _vector(coll.query_sparse[i])}
            pre = [q.Prefetch(limit=p["limit"],
                              query=q.Query.Nearest(vec[p["using"]], using=p["using"]),
                              params=q.SearchParams(exact=True)) for p in hybrid["prefetch"]]
            res = shard.query(q.QueryRequest(limit=hybrid["limit"], prefetches=pre,
                                             query=fusion))
            out.append([int(p.id) for p in res])
        return out
    finally:
        shard.close()


class QdrantSparse:
    """A sparse vector index of BM25 weights in an ``EdgeShard`` (inner product, exact)."""

    def __init__(self, workdir: Path) -> None:
        import qdrant_edge as q

        cfg = q.EdgeConfig(vectors={}, sparse_vectors={SPARSE: q.EdgeSparseVectorParams()})
        self._shard = q.EdgeShard.create(str(Path(workdir) / "qdrant-sparse"), cfg)

    def add(self, docs: Sequence[Sparse]) -> None:
        import qdrant_edge as q

        points = [q.Point(i, {SPARSE: _vector(d)}) for i, d in enumerate(docs) if d]
        for start in range(0, len(points), 1000):
            self._shard.update(q.UpdateOperation.upsert_points(points[start:start + 1000]))

    def search(self, query: Sparse, k: int) -> tuple[np.ndarray, np.ndarray]:
        import qdrant_edge as q

        if not query:
            return np.empty(0, dtype=np.int64), np.empty(0)
        res = self._shard.query(q.QueryRequest(
            limit=k, query=q.Query.Nearest(_vector(query), using=SPARSE),
            params=q.SearchParams(exact=True)))
        return (np.array([int(p.id) for p in res], dtype=np.int64),
                np.array([float(p.score) for p in res], dtype=np.float64))

    def close(self) -> None:
        self._shard.close()


HYBRID = HybridSearch(expressible=expressible, form=form, run=run)

__all__ = ["HYBRID", "QdrantSparse", "expressible", "form", "run"]
