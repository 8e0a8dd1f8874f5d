"""Milvus' sparse vectors holding BM25 weights: the sparse leg of a fusion in Milvus Lite.

A Milvus Lite database in the folder it is given (``workdir/milvus-sparse.db``, one process per
path), one collection ``rwb_sparse`` (``id`` int64, ``bm25_sparse`` SPARSE_FLOAT_VECTOR with a
``SPARSE_INVERTED_INDEX``, metric IP: the exact inner product). Inserted and flushed once,
never released and reloaded (Milvus Lite 3.2.2 fails to reload a collection holding a sparse
field).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexes.hybrid import Sparse

FIELD, COLLECTION = "bm25_sparse", "rwb_sparse"


class MilvusSparse:
    """A sparse vector collection of BM25 weights in Milvus Lite (inner product, exact)."""

    def __init__(self, workdir: Path) -> None:
        from pymilvus import DataType, MilvusClient

        self._client: Any = MilvusClient(str(Path(workdir) / "milvus-sparse.db"))
        schema = self._client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field(FIELD, DataType.SPARSE_FLOAT_VECTOR)
        index = self._client.prepare_index_params()
        index.add_index(FIELD, index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        self._client.create_collection(COLLECTION, schema=schema, index_params=index)

    def add(self, docs: Sequence[Sparse]) -> None:
        rows = [{"id": i, FIELD: {int(t): float(w) for t, w in d.items()}}
                for i, d in enumerate(docs) if d]
        for start in range(0, len(rows), 1000):
            self._client.insert(COLLECTION, rows[start:start + 1000])
        self._client.flush(COLLECTION)

    def search(self, query: Sparse, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, inner products > 0) of the top ``k``, best first."""
        if not query:
            return np.empty(0, dtype=np.int64), np.empty(0)
        res = self._client.search(COLLECTION, [{int(t): float(c) for t, c in query.items()}],
                                  anns_field=FIELD, limit=int(k),
                                  search_params={"metric_type": "IP"})
        hits = [(int(h["id"]), float(h["distance"])) for h in res[0] if h["distance"] > 0]
        return (np.array([h[0] for h in hits], dtype=np.int64),
                np.array([h[1] for h in hits], dtype=np.float64))

    def close(self) -> None:
        self._client.close()


__all__ = ["MilvusSparse"]
