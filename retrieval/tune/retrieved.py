"""The retrieved ids of each measured config, per query, as the caller's ids: ``ids.parquet``
in the run directory of ``rwb eval`` (every config) and ``rwb sweep`` (each unit's chosen
config).

One row per config x query: the config (``backend``, ``label``, ``build`` and ``search`` as
sorted JSON, and for a filtered workload ``strategy``, ``bucket``, ``overfetch``),
``query_set`` (``all`` | ``tune`` | ``heldout``), ``query`` (the caller's query id when the
dataset has query ids, else the query's position in the dataset's query order) and ``ids``
(the retrieved ids, nearest first: the caller's ids when the dataset has them, else row
numbers; fewer than k when the index returned fewer). Indexes answer with row positions; they
are mapped to the caller's ids here, once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.ids import ids_or_rows, query_keys
from retrieval.runs import RunDir, typed_frame

#: the file name in a run directory
IDS_FILE = "ids.parquet"


class RetrievedIds:
    """Collects the retrieved ids of measured configs over one dataset, then writes them."""

    def __init__(self, ds: VectorDataset) -> None:
        self.ds = ds
        self.rows: list[dict[str, Any]] = []

    def add(self, config: Mapping[str, Any], query_idx: np.ndarray | None,
            rows: np.ndarray | None, query_set: str) -> None:
        """``rows`` (n_queries, k) row positions (-1: no result) retrieved for the queries
        ``query_idx`` (positions; None: all) by ``config`` (plain values: backend, label,
        build and search dicts, strategy, ...)."""
        if rows is None:
            return
        qidx = np.arange(rows.shape[0]) if query_idx is None else np.asarray(query_idx)
        cols = {k: (json.dumps(v, sort_keys=True) if isinstance(v, dict) else v)
                for k, v in config.items()}
        for q, ids in zip(query_keys(self.ds.query_ids, qidx),
                          ids_or_rows(self.ds.base_ids, rows), strict=True):
            self.rows.append({**cols, "query_set": query_set, "query": q, "ids": ids})

    def write(self, run: RunDir) -> None:
        """``ids.parquet`` (nothing when no config was recorded)."""
        if not self.rows:
            return
        run.write_frame(IDS_FILE, typed_frame(self.rows))
