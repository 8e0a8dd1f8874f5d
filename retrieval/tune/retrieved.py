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

A sweep also appends each row to ``ids.jsonl`` as its unit is decided, so a resumed sweep (whose
earlier units are not decided again) still writes every unit's ids; the table is the log's rows,
the last one of each config x query kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.ids import ids_or_rows, query_keys
from retrieval.runs import RunDir, typed_frame

#: the file name in a run directory
IDS_FILE = "ids.parquet"
#: the sweep's log of rows, appended as units are decided (JSON lines)
IDS_LOG = "ids.jsonl"


class RetrievedIds:
    """Collects the retrieved ids of measured configs over one dataset, then writes them;
    with ``log`` (a file) each row is also appended there as it comes, and :meth:`write`
    writes what the log holds."""

    def __init__(self, ds: VectorDataset, log: Path | None = None) -> None:
        self.ds = ds
        self.log = log
        self.rows: list[dict[str, Any]] = []
        if log is not None and log.is_symlink():
            raise ConfigError(f"'{log}' is a symbolic link; rwb never writes through links "
                              f"(remove it)")

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
        new = [{**cols, "query_set": query_set, "query": q, "ids": ids}
               for q, ids in zip(query_keys(self.ds.query_ids, qidx),
                                 ids_or_rows(self.ds.base_ids, rows), strict=True)]
        self.rows += new
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in new)

    def write(self, run: RunDir) -> None:
        """``ids.parquet`` (nothing when no config was recorded)."""
        rows = self.rows if self.log is None else _read_log(self.log)
        if rows:
            run.write_frame(IDS_FILE, typed_frame(rows))


def _read_log(path: Path) -> list[dict[str, Any]]:
    """The log's rows, the last of each config x query kept (a unit decided again after a
    resume replaces its rows); a torn last line (a killed run) is skipped."""
    if not path.is_file():
        return []
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        key = json.dumps({k: v for k, v in row.items() if k != "ids"}, sort_keys=True)
        out[key] = row
    return list(out.values())
