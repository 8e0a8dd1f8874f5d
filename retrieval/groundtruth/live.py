"""Exact top-k per query over a live set that changes (inserts and deletes), kept up to date
incrementally instead of recomputed by brute force at every search step.

:class:`LiveGroundTruth` holds, for each query, a list ``L`` of the nearest live ids together
with a threshold ``t`` such that ``L`` is exactly the live ids whose key is ``<= t`` (key =
(distance, id): ascending distance, equal distances by ascending id; ``t`` is +inf while ``L``
holds the whole live set). That invariant survives both writes:

- an insert batch: the batch's ids with key <= t join ``L`` (a merge of sorted lists); when
  ``L`` grows past ``depth`` it is cut to ``depth`` and ``t`` becomes its last key;
- a delete: the ids leave ``L``; ``t`` stays.

``L[:k]`` is the exact top-k while ``len(L) >= k`` (or ``t`` is +inf). A query whose list ran
dry (fewer than k left after deletes) is recomputed from scratch over the live set, to depth
``k + margin``; only those queries are. :func:`brute_force_live` is the from-scratch reference
(same distances, same tie rule); a test checks they agree at every step of random runbooks.

Distances are rwb's (:mod:`retrieval.data`: squared L2, -inner product, cosine distance),
computed in float64 (so the order of a pair never depends on the batch it was computed in);
the live vectors are kept in memory as float64 (8 bytes per dimension per live vector). The
tie rule makes the result unique; Faiss ``IndexFlat`` (:mod:`retrieval.groundtruth.exact`) breaks
ties in heap order, so two exact answers may differ only among equal distances.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.data import Metric, check_metric
from retrieval.errors import ConfigError, DataError
from retrieval.groundtruth.exact import GroundTruth

#: id sentinel sorting after every real id (an empty list slot)
_NONE = np.iinfo(np.int64).max
#: inserted columns merged at a time (bounds memory to nq * (depth + chunk))
_CHUNK = 1024


def _prepare(x: np.ndarray, metric: Metric) -> np.ndarray:
    out = np.asarray(x, dtype=np.float64)
    if metric == "cosine":
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out = out / norms
    return np.ascontiguousarray(out)


def _distances(q: np.ndarray, x: np.ndarray, metric: Metric) -> np.ndarray:
    """rwb distances (nq, n) between prepared float64 rows."""
    if metric == "l2":
        d = (q * q).sum(1)[:, None] - 2.0 * (q @ x.T) + (x * x).sum(1)[None, :]
        return np.asarray(np.maximum(d, 0.0))
    ip = q @ x.T
    return np.asarray(-ip if metric == "ip" else 1.0 - ip)


def _top(d: np.ndarray, ids: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``depth`` smallest keys of each row of (d, ids), sorted; padded with (inf, _NONE)."""
    if d.shape[1] > 4 * depth and d.shape[0]:
        # narrow first: the m smallest distances of a row hold every element whose distance
        # ties with or beats its depth-th smallest (m = the largest such count over rows)
        kth = np.partition(d, depth - 1, axis=1)[:, depth - 1:depth]
        m = int((d <= kth).sum(axis=1).max())
        if m < d.shape[1]:
            part = np.argpartition(d, m - 1, axis=1)[:, :m]
            d, ids = np.take_along_axis(d, part, 1), np.take_along_axis(ids, part, 1)
    order = np.lexsort((ids, d), axis=-1)[:, :depth]
    od, oi = np.take_along_axis(d, order, 1), np.take_along_axis(ids, order, 1)
    if od.shape[1] < depth:
        pad = depth - od.shape[1]
        od = np.hstack([od, np.full((d.shape[0], pad), np.inf)])
        oi = np.hstack([oi, np.full((d.shape[0], pad), _NONE, dtype=np.int64)])
    return od, oi


def _as_result(d: np.ndarray, i: np.ndarray) -> GroundTruth:
    none = i == _NONE
    return GroundTruth(np.where(none, -1, i).astype(np.int64),
                       np.where(none, np.inf, d).astype(np.float32))


def brute_force_live(queries: np.ndarray, vectors: np.ndarray, ids: np.ndarray, metric: Metric,
                     k: int) -> GroundTruth:
    """Exact top-k of ``queries`` among ``vectors`` labelled ``ids`` (from scratch), with the
    tie rule of :class:`LiveGroundTruth`; ids -1 / distances +inf past the live count."""
    check_metric(metric, where="brute_force_live")
    q = _prepare(queries, metric)
    x = _prepare(vectors, metric)
    d = _distances(q, x, metric)
    return _as_result(*_top(d, np.broadcast_to(np.asarray(ids, dtype=np.int64), d.shape), k))


@dataclass(frozen=True)
class LiveStats:
    """Work done so far: ``recomputed`` queries recomputed from scratch (lists run dry),
    ``inserted`` / ``deleted`` ids applied."""

    recomputed: int
    inserted: int
    deleted: int


class LiveGroundTruth:
    """Exact top-``k`` of fixed ``queries`` over a live set changed by :meth:`insert` and
    :meth:`delete` (ids: the caller's int64 >= 0); :meth:`top` is the answer after the last
    write. ``margin`` extra neighbours are kept per query (default ``max(k, 10)``): deeper
    lists run dry less often under deletes and cost more per insert.
    """

    def __init__(self, queries: np.ndarray, metric: Metric, k: int, *,
                 margin: int | None = None) -> None:
        check_metric(metric, where="LiveGroundTruth")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"LiveGroundTruth: field 'k' must be an integer >= 1; received {k!r}")
        margin = max(k, 10) if margin is None else margin
        if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
            raise ConfigError(f"LiveGroundTruth: field 'margin' must be an integer >= 0; "
                              f"received {margin!r}")
        self.metric: Metric = metric
        self.k, self.depth = k, k + margin
        self._q = _prepare(queries, metric)
        nq = self._q.shape[0]
        self._ld = np.full((nq, self.depth), np.inf)
        self._li = np.full((nq, self.depth), _NONE, dtype=np.int64)
        self._count = np.zeros(nq, dtype=np.int64)
        self._td = np.full(nq, np.inf)  # threshold key (distance, id); inf: list is complete
        self._ti = np.full(nq, _NONE, dtype=np.int64)
        self._vecs = np.zeros((0, self._q.shape[1]))
        self._vid = np.zeros(0, dtype=np.int64)
        self._alive = np.zeros(0, dtype=bool)
        self._slot: dict[int, int] = {}
        self._recomputed = self._inserted = self._deleted = 0

    # --- the live store -----------------------------------------------------------------------
    @property
    def live_count(self) -> int:
        return len(self._slot)

    @property
    def stats(self) -> LiveStats:
        return LiveStats(self._recomputed, self._inserted, self._deleted)

    def live(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, prepared float64 vectors) of the live set, in insertion order."""
        return self._vid[self._alive], self._vecs[self._alive]

    def _ids(self, ids: np.ndarray, n: int, what: str) -> np.ndarray:
        arr = np.asarray(ids)
        if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
            raise DataError(f"LiveGroundTruth {what}: ids must be {n} integers; received "
                            f"{arr.dtype} {arr.shape}")
        out = arr.astype(np.int64)
        if n and (int(out.min()) < 0 or np.unique(out).shape[0] != n):
            raise DataError(f"LiveGroundTruth {what}: ids must be unique and >= 0")
        return out

    # --- writes --------------------------------------------------------------------------------
    def insert(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add ``vectors`` (m, dim) under ``ids`` (none of them live)."""
        x = _prepare(vectors, self.metric)
        if x.ndim != 2 or x.shape[1] != self._q.shape[1]:
            raise DataError(f"LiveGroundTruth insert: vectors must be (m, {self._q.shape[1]}); "
                            f"received {x.shape}")
        new = self._ids(ids, x.shape[0], "insert")
        live = [v for v in new.tolist() if v in self._slot]
        if live:
            raise DataError(f"LiveGroundTruth insert: id {live[0]} is already live")
        start = self._vid.shape[0]
        self._vecs = np.vstack([self._vecs, x])
        self._vid = np.concatenate([self._vid, new])
        self._alive = np.concatenate([self._alive, np.ones(len(new), dtype=bool)])
        self._slot.update(zip(new.tolist(), range(start, start + len(new)), strict=True))
        for lo in range(0, len(new), _CHUNK):
            self._merge(x[lo:lo + _CHUNK], new[lo:lo + _CHUNK])
        self._inserted += len(new)

    def _merge(self, x: np.ndarray, ids: np.ndarray) -> None:
        d = _distances(self._q, x, self.metric)
        bi = np.broadcast_to(ids, d.shape)
        keep = (d < self._td[:, None]) | ((d == self._td[:, None]) & (bi <= self._ti[:, None]))
        d = np.where(keep, d, np.inf)
        bi = np.where(keep, bi, _NONE)
        total = self._count + keep.sum(axis=1)
        self._ld, self._li = _top(np.hstack([self._ld, d]), np.hstack([self._li, bi]), self.depth)
        self._count = np.minimum(total, self.depth)
        cut = total > self.depth  # the list was cut: its last key is the new threshold
        self._td[cut], self._ti[cut] = self._ld[cut, -1], self._li[cut, -1]

    def delete(self, ids: np.ndarray) -> None:
        """Remove the live ``ids``; queries left with fewer than k exact neighbours are
        recomputed from scratch over the live set."""
        gone = self._ids(ids, np.asarray(ids).shape[0] if np.ndim(ids) == 1 else -1, "delete")
        missing = [v for v in gone.tolist() if v not in self._slot]
        if missing:
            raise DataError(f"LiveGroundTruth delete: id {missing[0]} is not live")
        for v in gone.tolist():
            self._alive[self._slot.pop(v)] = False
        self._deleted += len(gone)
        hit = np.isin(self._li, gone)
        rows = np.flatnonzero(hit.any(axis=1))
        if rows.size:
            ld = np.where(hit[rows], np.inf, self._ld[rows])
            li = np.where(hit[rows], _NONE, self._li[rows])
            self._ld[rows], self._li[rows] = _top(ld, li, self.depth)
            self._count[rows] -= hit[rows].sum(axis=1)
        dry = np.flatnonzero((self._count < self.k) & (self._td < np.inf))
        if dry.size:
            self._recompute(dry)
        if self._alive.shape[0] > 1024 and self.live_count < self._alive.shape[0] // 2:
            self._compact()

    def _recompute(self, rows: np.ndarray) -> None:
        vid, vecs = self.live()
        d = _distances(self._q[rows], vecs, self.metric)
        self._ld[rows], self._li[rows] = _top(d, np.broadcast_to(vid, d.shape), self.depth)
        n = vid.shape[0]
        self._count[rows] = min(n, self.depth)
        if n > self.depth:
            self._td[rows], self._ti[rows] = self._ld[rows, -1], self._li[rows, -1]
        else:
            self._td[rows], self._ti[rows] = np.inf, _NONE
        self._recomputed += int(rows.size)

    def _compact(self) -> None:
        self._vid, self._vecs = self.live()
        self._alive = np.ones(self._vid.shape[0], dtype=bool)
        self._slot = {v: s for s, v in enumerate(self._vid.tolist())}

    # --- the answer ----------------------------------------------------------------------------
    def top(self, k: int | None = None) -> GroundTruth:
        """Exact top-``k`` (default the constructor's k; at most k) over the live set: ids
        int64 (nq, k), -1 past the live count; distances float32, rwb convention."""
        k = self.k if k is None else k
        if not 1 <= k <= self.k:
            raise ConfigError(f"LiveGroundTruth.top: field 'k' must be in [1, {self.k}]; "
                              f"received {k}")
        return _as_result(self._ld[:, :k], self._li[:, :k])


__all__ = ["LiveGroundTruth", "LiveStats", "brute_force_live"]
