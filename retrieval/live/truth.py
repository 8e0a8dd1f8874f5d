"""Exact ground truth of a live collection, two ways:

- ``exact``: the engine's own exact path (:class:`~retrieval.indexes.live.SupportsExactSearch`;
  pgvector with index scans off inside the read-only transaction), one query at a time, paced
  by the budget like every other search on the collection;
- ``snapshot``: the vectors and ids streamed out (:class:`~retrieval.indexes.live.SupportsSnapshot`)
  into rwb's out-of-core store in chunks (:class:`Snapshot`: ``ids.i64`` + ``vectors.f32``, raw
  little-endian, appended chunk by chunk with a ``state.json`` after each, so a killed snapshot
  resumes at the row it reached), fingerprinted (sha256 of the ids, vectors and metric), then the
  out-of-core exact search of :mod:`retrieval.groundtruth.ooc` (chunked, ties by row = by id,
  since the snapshot is in id order). Snapshot throughput (rows/s) is logged and returned.

Both give the collection's own ids and rwb's distances (:mod:`retrieval.data`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import ConfigError
from retrieval.groundtruth.exact import GroundTruth
from retrieval.indexes.live import LiveCollection, SupportsExactSearch, SupportsSnapshot
from retrieval.live.pace import Pacer
from retrieval.phases import report
from retrieval.runs.rundir import write_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnapshotInfo:
    """What a snapshot took: ``rows``, ``seconds`` (wall, this call), ``rows_per_s``,
    ``resumed_at`` (rows already there when it started), ``fingerprint``, ``path``, ``bytes``
    (vectors + ids on disk)."""

    rows: int
    seconds: float
    rows_per_s: float
    resumed_at: int
    fingerprint: str
    path: str
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "seconds": round(self.seconds, 3),
                "rows_per_s": round(self.rows_per_s, 1), "resumed_at": self.resumed_at,
                "fingerprint": self.fingerprint, "path": self.path, "bytes": self.bytes}


def _key(col: LiveCollection) -> str:
    d = col.describe()
    text = json.dumps([d.engine, d.name, d.dim, d.metric, dict(d.details).get("where")],
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class Snapshot:
    """A collection's vectors in id order under ``folder`` (see the module docstring)."""

    def __init__(self, folder: Path, col: LiveCollection) -> None:
        d = col.describe()
        self.col, self.dim, self.metric = col, d.dim, d.metric
        self.folder = folder / f"snapshot-{_key(col)}"
        self.ids_path = self.folder / "ids.i64"
        self.vec_path = self.folder / "vectors.f32"
        self.state_path = self.folder / "state.json"

    def _state(self) -> dict[str, Any]:
        try:
            got = json.loads(self.state_path.read_text(encoding="utf-8"))
            return got if isinstance(got, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save_state(self, **state: Any) -> None:
        write_atomic(self.state_path, json.dumps(state) + "\n")

    def take(self, batch: int = 10_000) -> SnapshotInfo:
        """Stream the collection in (resuming a partial snapshot of the same collection with
        the same row count; a complete one is reused as it is)."""
        if not isinstance(self.col, SupportsSnapshot):
            raise ConfigError(f"ground_truth.method snapshot: the {self.col.describe().engine} "
                              f"adapter cannot stream its vectors; use method exact")
        rows_now = self.col.describe().rows
        self.folder.mkdir(parents=True, exist_ok=True)
        st = self._state()
        done = int(st.get("rows_done", 0)) if st.get("rows_expected") == rows_now else 0
        if st.get("complete") and done == rows_now and st.get("fingerprint"):
            return SnapshotInfo(done, 0.0, 0.0, done, str(st["fingerprint"]),
                                str(self.folder), self._bytes())
        for p, item in ((self.ids_path, 8), (self.vec_path, 4 * self.dim)):
            with open(p, "ab") as fh:
                fh.truncate(done * item)  # drop a chunk written after the last state
        if done:
            log.info("snapshot: resuming at row %d of %d (%s)", done, rows_now, self.folder)
        t0, got = time.perf_counter(), done
        with open(self.ids_path, "ab") as fi, open(self.vec_path, "ab") as fv:
            for ids, vecs in self.col.iter_vectors(batch=batch, start=done):
                fi.write(np.ascontiguousarray(ids, dtype="<i8").tobytes())
                fv.write(np.ascontiguousarray(vecs, dtype="<f4").tobytes())
                fi.flush()
                fv.flush()
                os.fsync(fi.fileno())
                os.fsync(fv.fileno())
                got += int(ids.shape[0])
                self._save_state(rows_done=got, rows_expected=rows_now, dim=self.dim,
                                 metric=self.metric, complete=False)
                report("snapshot", got, max(rows_now, got), "rows streamed")
        took = time.perf_counter() - t0
        fp = self.fingerprint()
        self._save_state(rows_done=got, rows_expected=rows_now, dim=self.dim,
                         metric=self.metric, complete=True, fingerprint=fp)
        rate = (got - done) / took if took > 0 else 0.0
        log.info("snapshot: %d rows (%d new) in %.2f s, %.0f rows/s", got, got - done, took, rate)
        return SnapshotInfo(got, took, rate, done, fp, str(self.folder), self._bytes())

    def _bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.ids_path, self.vec_path) if p.exists())

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64 (n,), vectors float32 (n, dim) memory-mapped)."""
        n = self.ids_path.stat().st_size // 8
        ids = np.fromfile(self.ids_path, dtype="<i8")
        if n == 0:
            return ids, np.zeros((0, self.dim), dtype=np.float32)
        vecs = np.memmap(self.vec_path, dtype="<f4", mode="r", shape=(n, self.dim))
        return ids, vecs

    def fingerprint(self) -> str:
        """sha256 (16 hex) of the metric, the ids and the vectors, read in 32 MB chunks."""
        h = hashlib.sha256(self.metric.encode())
        for p in (self.ids_path, self.vec_path):
            with open(p, "rb") as fh:
                while chunk := fh.read(32 << 20):
                    h.update(chunk)
        return h.hexdigest()[:16]


def snapshot_truth(snap: Snapshot, queries: np.ndarray, k: int) -> GroundTruth:
    """Exact top-``k`` of ``queries`` over a taken snapshot (out of core), as collection ids."""
    from retrieval.groundtruth.ooc import exact_topk, to_rwb_distances

    ids, vecs = snap.arrays()
    if ids.size == 0:
        raise ConfigError("the live collection has no rows: nothing to search")
    keys, rows = exact_topk(vecs, np.ascontiguousarray(queries, dtype=np.float32),
                            snap.metric, min(k, int(ids.size)))  # type: ignore[arg-type]
    dist = to_rwb_distances(keys, rows, snap.metric)  # type: ignore[arg-type]
    out = np.where(rows >= 0, ids[np.maximum(rows, 0)], -1)
    if out.shape[1] < k:
        pad = k - out.shape[1]
        out = np.concatenate([out, np.full((out.shape[0], pad), -1, np.int64)], axis=1)
        dist = np.concatenate([dist, np.full((dist.shape[0], pad), np.inf, np.float32)], 1)
    return GroundTruth(out.astype(np.int64), dist)


def engine_truth(col: LiveCollection, queries: np.ndarray, k: int, pacer: Pacer,
                 extra: list[LiveCollection] | None = None) -> GroundTruth:
    """Exact top-``k`` through the engine's own exact path, paced by ``pacer`` (``extra``:
    more handles on the same collection, one per extra worker)."""
    handles = [col, *(extra or [])]
    exact = [h for h in handles if isinstance(h, SupportsExactSearch)]
    if len(exact) != len(handles):
        raise ConfigError(f"ground_truth.method exact: the {col.describe().engine} adapter has "
                          f"no exact search; use method snapshot")
    res, _ = pacer.run([h.search_exact for h in exact], queries, k)
    return GroundTruth(res.ids, res.distances)


__all__ = ["Snapshot", "SnapshotInfo", "engine_truth", "snapshot_truth"]
