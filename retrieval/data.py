"""Datasets that cross module boundaries: vectors with exact ground truth, and text collections.

Distances everywhere in rwb are *lower is closer*:
- ``l2``: squared Euclidean distance (>= 0);
- ``ip``: negative inner product (unbounded);
- ``cosine``: cosine distance ``1 - cos`` (0..2).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from retrieval.errors import DataError, param_error
from retrieval.filtering.attrs import Attributes

Metric = Literal["l2", "ip", "cosine"]
METRICS: tuple[str, ...] = ("l2", "ip", "cosine")


def check_metric(metric: str, where: str | None = None) -> Metric:
    if metric not in METRICS:
        raise param_error("metric", f"one of {', '.join(METRICS)}", metric, where=where)
    return metric  # type: ignore[return-value]


def as_matrix(x: object, name: str, *, dim: int | None = None) -> np.ndarray:
    """Return ``x`` as a C-contiguous float32 matrix; raise DataError on bad shape or values."""
    arr = np.asarray(x)
    if arr.ndim == 1 and arr.size and dim is not None and arr.shape[0] == dim:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise DataError(f"{name}: expected a 2-d matrix (n, dim); received shape {arr.shape}")
    if arr.shape[0] == 0:
        raise DataError(f"{name}: is empty (0 vectors); at least 1 vector is required")
    if arr.shape[1] == 0:
        raise DataError(f"{name}: vectors have dimension 0")
    if dim is not None and arr.shape[1] != dim:
        raise DataError(f"{name}: dimension must be {dim}; received {arr.shape[1]}")
    if not np.issubdtype(arr.dtype, np.number):
        raise DataError(f"{name}: expected numeric vectors; received dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(np.argwhere(~finite.all(axis=1))[0, 0])
        raise DataError(f"{name}: contains NaN or inf values (first at row {bad})")
    return arr


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """L2-normalise rows (float32); zero rows stay zero."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms, dtype=np.float32)


@dataclass(frozen=True, eq=False)
class VectorDataset:
    """Base vectors and query vectors under one metric.

    ``gt_ids``/``gt_distances`` may come with the files (ann-benchmarks HDF5); otherwise they are
    computed exactly by :mod:`retrieval.groundtruth` and cached. ``attributes`` (optional): one
    value per base vector (:class:`retrieval.filtering.Attributes`) for filtered search; they do
    not change the fingerprint.
    """

    name: str
    base: np.ndarray
    queries: np.ndarray
    metric: Metric
    gt_ids: np.ndarray | None = None
    gt_distances: np.ndarray | None = None
    source: str = ""
    info: dict[str, object] = field(default_factory=dict)
    attributes: Attributes | None = None

    def __repr__(self) -> str:  # the arrays' shapes, not their contents
        gt = "" if self.gt_ids is None else f", gt_ids {self.gt_ids.shape}"
        return (f"VectorDataset(name={self.name!r}, metric={self.metric!r}, "
                f"base {self.base.shape} {self.base.dtype}, queries {self.queries.shape}{gt}"
                + ("" if self.attributes is None else f", attributes {self.attributes.names}")
                + ")")

    def __post_init__(self) -> None:
        check_metric(self.metric, where=f"dataset '{self.name}'")
        base = as_matrix(self.base, f"dataset '{self.name}' base vectors")
        queries = as_matrix(self.queries, f"dataset '{self.name}' query vectors")
        if queries.shape[1] != base.shape[1]:
            raise DataError(
                f"dataset '{self.name}': query dimension {queries.shape[1]} does not match "
                f"base dimension {base.shape[1]}"
            )
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "queries", queries)
        if self.attributes is not None and self.attributes.n != base.shape[0]:
            raise DataError(f"dataset '{self.name}': attributes have {self.attributes.n} rows "
                            f"for {base.shape[0]} base vectors (one per base vector)")

    @classmethod
    def from_arrays(
        cls,
        base: object,
        queries: object,
        metric: str,
        *,
        name: str = "arrays",
        gt_ids: object | None = None,
    ) -> VectorDataset:
        """A dataset from in-memory vectors (numpy arrays or anything ``np.asarray`` takes):
        ``base`` (n, dim), ``queries`` (m, dim), ``metric`` l2 | ip | cosine (rwb's distances:
        lower is closer). Checked like files are (shape, dimension, NaN/inf: DataError).

        Ground truth is computed exactly when the dataset is first evaluated
        (:func:`retrieval.groundtruth.ground_truth`: Faiss flat search, cached by the data's
        fingerprint); pass ``gt_ids`` (m, >= k neighbour ids) to use known neighbours instead.
        """
        checked = check_metric(metric, where=f"dataset '{name}'")
        ids = None
        if gt_ids is not None:
            ids = np.asarray(gt_ids)
            if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
                raise DataError(f"dataset '{name}' gt_ids: expected a 2-d integer matrix "
                                f"(n_queries, depth); received shape {ids.shape}, dtype "
                                f"{ids.dtype}")
            ids = ids.astype(np.int64)
        ds = cls(name=name, base=base, queries=queries, metric=checked, gt_ids=ids,  # type: ignore[arg-type]
                 source="in-memory arrays", info={"origin": "from_arrays"})
        if ids is not None:
            if ids.shape[0] != ds.n_queries:
                raise DataError(f"dataset '{name}' gt_ids: {ids.shape[0]} rows for "
                                f"{ds.n_queries} queries")
            if ids.size and (ids.min() < 0 or ids.max() >= ds.n_base):
                raise DataError(f"dataset '{name}' gt_ids: ids must lie in [0, {ds.n_base}); "
                                f"received {int(ids.min())}..{int(ids.max())}")
        return ds

    @property
    def dim(self) -> int:
        return int(self.base.shape[1])

    @property
    def n_base(self) -> int:
        return int(self.base.shape[0])

    @property
    def n_queries(self) -> int:
        return int(self.queries.shape[0])

    @cached_property
    def fingerprint(self) -> str:
        """sha256 (hex, 16 chars) of the base and query bytes and the metric."""
        h = hashlib.sha256()
        h.update(self.metric.encode())
        for arr in (self.base, self.queries):
            h.update(str(arr.shape).encode())
            h.update(arr.tobytes())
        return h.hexdigest()[:16]

    def subset_queries(self, idx: np.ndarray, suffix: str) -> VectorDataset:
        """A dataset with only the queries at ``idx`` (ground truth sliced alike)."""
        return VectorDataset(
            name=f"{self.name}[{suffix}]",
            base=self.base,
            queries=self.queries[idx],
            metric=self.metric,
            gt_ids=None if self.gt_ids is None else self.gt_ids[idx],
            gt_distances=None if self.gt_distances is None else self.gt_distances[idx],
            source=self.source,
            info=dict(self.info),
            attributes=self.attributes,
        )


@dataclass(frozen=True, eq=False)
class TextCollection:
    """A text corpus with optional queries and graded relevance judgments.

    ``qrels[query_id][doc_id] = grade`` (grade >= 1 is relevant unless a loader says otherwise).
    Dict order is the collection's own order.
    """

    name: str
    corpus: dict[str, str]
    queries: dict[str, str] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    source: str = ""
    info: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.corpus:
            raise DataError(f"collection '{self.name}': corpus is empty")

    @cached_property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for mapping in (self.corpus, self.queries):
            for key, text in mapping.items():
                h.update(key.encode())
                h.update(b"\0")
                h.update(text.encode())
                h.update(b"\1")
        return h.hexdigest()[:16]

    def unknown_qrels(self) -> dict[str, list[str]]:
        """Judged doc ids per query that are not in the corpus (reported, never dropped)."""
        out: dict[str, list[str]] = {}
        for qid, docs in self.qrels.items():
            missing = [d for d in docs if d not in self.corpus]
            if missing:
                out[qid] = missing
        return out
