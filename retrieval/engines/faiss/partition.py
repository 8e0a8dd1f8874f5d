"""The coarse partition of a Faiss IVF build, trained but not filled (the scale study's
partition model: :meth:`retrieval.engines.faiss.ivf.FaissIvfIndex.coarse_partition`).

``assign`` and ``rank`` go through the trained quantizer itself (``IndexFlatL2`` or
``IndexFlatIP`` as the factory made it, rows normalised for cosine by
:func:`retrieval.engines.faiss.common.prepare`), so a row lands in the list an ``add`` would
put it in and a query's lists come in the order an IVF search probes them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.data import Metric
from retrieval.engines.faiss import common as fc

#: rows assigned / queries ranked per quantizer call (bounds the (rows x nlist) buffers)
CHUNK = 4096


class FaissPartition:
    """A trained Faiss coarse quantizer of ``nlist`` lists (see the module doc); ``owner``
    keeps the index that owns the quantizer alive."""

    def __init__(self, quantizer: Any, nlist: int, metric: Metric, owner: Any,
                 train_rows: int) -> None:
        self.quantizer, self.nlist, self.metric, self._owner = quantizer, int(nlist), metric, owner
        self.train_rows = int(train_rows)

    def centroids(self) -> np.ndarray:
        """The ``nlist`` centroids (float32, ``nlist x dim``)."""
        return np.asarray(self.quantizer.reconstruct_n(0, self.nlist), dtype=np.float32)

    def assign(self, x: np.ndarray) -> np.ndarray:
        """The list each row of ``x`` is added to (int64, ``(n,)``)."""
        out = np.empty(int(x.shape[0]), dtype=np.int64)
        for s in range(0, out.size, CHUNK):
            _, i = self.quantizer.search(fc.prepare(np.asarray(x[s:s + CHUNK]), self.metric), 1)
            out[s:s + CHUNK] = i[:, 0]
        return out

    def rank(self, queries: np.ndarray) -> np.ndarray:
        """Each query's lists, nearest first (int64, ``(nq, nlist)``)."""
        out = np.empty((int(queries.shape[0]), self.nlist), dtype=np.int64)
        for s in range(0, out.shape[0], CHUNK):
            q = fc.prepare(np.asarray(queries[s:s + CHUNK]), self.metric)
            out[s:s + CHUNK] = self.quantizer.search(q, self.nlist)[1]
        return out


__all__ = ["FaissPartition"]
