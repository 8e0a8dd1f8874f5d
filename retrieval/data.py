"""Datasets that cross module boundaries: vectors with exact ground truth, and text collections.

Distances everywhere in rwb are *lower is closer*:
- ``l2``: squared Euclidean distance (>= 0);
- ``ip``: negative inner product (unbounded);
- ``cosine``: cosine distance ``1 - cos`` (0..2).
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

from retrieval.errors import DataError, param_error
from retrieval.filtering.attrs import Attributes
from retrieval.ids import CallerIds, as_ids

log = logging.getLogger(__name__)

Metric = Literal["l2", "ip", "cosine"]
METRICS: tuple[str, ...] = ("l2", "ip", "cosine")


def check_metric(metric: str, where: str | None = None) -> Metric:
    if metric not in METRICS:
        raise param_error("metric", f"one of {', '.join(METRICS)}", metric, where=where)
    return metric  # type: ignore[return-value]


#: bytes of one chunk when a memory-mapped matrix is read piece by piece
CHUNK_BYTES = 32 << 20
#: chunk row counts are multiples of this (Faiss's BLAS database block), so a chunked exact
#: search computes every distance with the same arithmetic as a search over the whole base
CHUNK_ALIGN = 1024


def is_out_of_core(x: object) -> bool:
    """Whether ``x`` is (a view of) a memory-mapped file: rwb then reads it in chunks and never
    materialises it whole."""
    obj: object = x
    for _ in range(32):
        if isinstance(obj, np.memmap | mmap.mmap):
            return True
        obj = getattr(obj, "base", None)
        if obj is None:
            return False
    return False


def chunk_rows(dim: int, *, rows: int | None = None, itemsize: int = 4) -> int:
    """Rows per chunk: ``rows`` if given, else about :data:`CHUNK_BYTES` of ``dim``-wide rows,
    a multiple of :data:`CHUNK_ALIGN`."""
    if rows is not None:
        if rows < 1:
            raise param_error("rows", "an integer >= 1", rows, where="chunked read")
        return int(rows)
    per = max(1, CHUNK_BYTES // max(1, dim * itemsize))
    return max(CHUNK_ALIGN, per // CHUNK_ALIGN * CHUNK_ALIGN)


def _shared_map(x: object) -> tuple[mmap.mmap, int] | None:
    """The shared file mapping behind ``x`` (a :class:`numpy.memmap` opened ``r``, ``r+`` or
    ``w+``, or a view of one) and the address of its first byte; None for anything else (an
    in-memory array, a copy-on-write ``c`` map, a bare :class:`mmap.mmap`)."""
    mode: str | None = None
    obj: object = x
    for _ in range(32):
        if isinstance(obj, np.memmap) and mode is None:
            mode = getattr(obj, "mode", None)
        if isinstance(obj, mmap.mmap):
            if mode not in ("r", "r+", "w+"):
                return None
            try:
                return obj, int(np.frombuffer(obj, dtype=np.uint8).ctypes.data)
            except (ValueError, TypeError, BufferError):  # closed, or empty
                return None
        obj = getattr(obj, "base", None)
        if obj is None:
            return None
    return None


def _byte_bounds(x: np.ndarray) -> tuple[int, int]:
    """(first, one past the last) address of the bytes ``x`` spans."""
    lo = hi = int(x.__array_interface__["data"][0])
    for size, stride in zip(x.shape, x.strides, strict=True):
        if size == 0:
            return lo, lo
        reach = (size - 1) * stride
        lo, hi = (lo + reach, hi) if reach < 0 else (lo, hi + reach)
    return lo, hi + x.itemsize


def release_pages(x: np.ndarray) -> None:
    """Drop the file pages that ``x`` (rows of a shared memory map, see :func:`_shared_map`)
    spans from this process's resident set (``madvise(MADV_DONTNEED)``, rounded out to whole
    pages). The data stay in the OS page cache (written pages are kept and written back) and
    a later read of ``x`` faults them in again, so nothing changes but the resident size: a
    pass over a mapped file that releases each chunk once it is consumed stays resident at
    about one chunk, whatever the file's size, instead of the whole file. A no-op for
    in-memory arrays, copy-on-write maps and where ``madvise`` is missing."""
    advice: int | None = getattr(mmap, "MADV_DONTNEED", None)
    found = _shared_map(x) if advice is not None else None
    if found is None or advice is None:
        return
    mm, start = found
    lo, hi = _byte_bounds(x)
    first = max(0, (lo - start) // mmap.PAGESIZE * mmap.PAGESIZE)
    last = min(len(mm), hi - start)
    if last > first:
        try:
            mm.madvise(advice, first, last - first)
        except (OSError, ValueError) as exc:  # a hint only: the read itself was right
            log.debug("madvise(MADV_DONTNEED) failed: %s", exc)


def take_rows(base: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``base[rows]`` (an in-memory copy, the base's dtype) for integer row ids ``rows``; from
    a memory-mapped base gathered about :data:`CHUNK_BYTES` of rows at a time with the file
    pages released after each piece (:func:`release_pages`), so the resident size is the
    result plus one piece, not the file."""
    idx = np.asarray(rows)
    if not is_out_of_core(base) or idx.ndim != 1 or idx.dtype.kind not in "iu":
        return np.asarray(base[idx])
    out = np.empty((idx.size, *base.shape[1:]), dtype=base.dtype)
    step = chunk_rows(int(np.prod(base.shape[1:], dtype=np.int64)), itemsize=base.itemsize)
    for lo, hi in row_chunks(idx.size, step):
        part = idx[lo:hi]
        out[lo:hi] = base[part]
        if part.size:
            release_pages(base[int(part.min()):int(part.max()) + 1])
    return out


def row_chunks(n: int, rows: int, start: int = 0) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` row ranges of at most ``rows`` rows covering ``start..n``."""
    for lo in range(start, n, rows):
        yield lo, min(n, lo + rows)


def base_chunks(
    ds: VectorDataset | np.ndarray,
    rows: int | None = None,
    *,
    metric: Metric | None = None,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, chunk)`` over the base vectors (a dataset's, or a matrix), each chunk a
    C-contiguous float32 copy of at most ``rows`` rows (default: :func:`chunk_rows`), rows
    L2-normalised when the metric (the dataset's, or ``metric``) is cosine. Memory: one chunk.

    A chunk of a mapped float32 base may be a view of the file (no copy); when the next chunk
    is asked for (or the loop ends), its file pages are released from the resident set
    (:func:`release_pages`: the chunk stays readable, a later read faults the same bytes in
    again), so a pass over a mapped base stays resident at about one chunk."""
    base = ds.base if isinstance(ds, VectorDataset) else ds
    m = ds.metric if isinstance(ds, VectorDataset) and metric is None else metric
    n = int(base.shape[0]) if stop is None else min(int(stop), int(base.shape[0]))
    step = chunk_rows(int(base.shape[1]), rows=rows)
    mapped = is_out_of_core(base)
    for lo, hi in row_chunks(n, step, start):
        rows_view = base[lo:hi]
        chunk = np.ascontiguousarray(rows_view, dtype=np.float32)
        try:
            yield lo, normalize_rows(chunk) if m == "cosine" else chunk
        finally:
            if mapped:
                release_pages(rows_view)


def _check_magnitude(part: np.ndarray, name: str) -> None:
    """Refuse values so large that float32 distances overflow (every neighbour then ties at
    infinity and recall means nothing): |x| * 2 * sqrt(dim) must stay below sqrt(float32 max)."""
    if part.size == 0:
        return
    top = max(float(part.max()), -float(part.min()))  # no |x| copy of a large matrix
    limit = float(np.sqrt(np.finfo(np.float32).max)) / (2.0 * np.sqrt(part.shape[1]))
    if top > limit:
        raise DataError(
            f"{name}: values up to {top:.3g} in magnitude; distances between such vectors "
            f"overflow float32 (every neighbour ties at infinity): values must stay within "
            f"{limit:.3g} at dimension {part.shape[1]}; rescale the vectors"
        )


def _check_chunks(arr: np.ndarray, name: str) -> None:
    """The finiteness check of :func:`as_matrix`, one chunk at a time."""
    step = chunk_rows(int(arr.shape[1]))
    for lo, hi in row_chunks(int(arr.shape[0]), step):
        part = np.asarray(arr[lo:hi])
        finite = np.isfinite(part)
        try:
            if finite.all():  # read while the pages are in, before they are released
                _check_magnitude(part, name)
        finally:
            release_pages(arr[lo:hi])
        if not finite.all():
            bad = lo + int(np.argwhere(~finite.all(axis=1))[0, 0])
            raise DataError(f"{name}: contains NaN or inf values (first at row {bad})")


def as_matrix(x: object, name: str, *, dim: int | None = None,
              mapped: bool = False) -> np.ndarray:
    """Return ``x`` as a C-contiguous float32 matrix; raise DataError on bad shape or values.

    A memory-mapped float32 matrix (:func:`is_out_of_core`) is checked chunk by chunk and
    returned as it is (possibly strided): it is never copied whole into memory. With ``mapped``
    (datasets, and builds that read :func:`base_chunks`) a memory-mapped matrix of another
    numeric dtype (uint8 from a ``.bvecs`` file, ...) is returned as it is too, and read as
    float32 chunk by chunk; without it, it is converted to float32 in memory."""
    arr = x if isinstance(x, np.ndarray) and is_out_of_core(x) else np.asarray(x)
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
    if arr.dtype.kind == "c":  # never silently dropped to its real part
        raise DataError(f"{name}: expected real vectors; received complex dtype {arr.dtype}")
    if is_out_of_core(arr) and (arr.dtype == np.float32 or (mapped and arr.dtype.kind in "fiu")):
        if arr.dtype.kind == "f":
            _check_chunks(arr, name)
        return arr
    if is_out_of_core(arr) and arr.size * 4 > CHUNK_BYTES:
        log.info("%s: memory-mapped %s matrix converted to float32 in memory (%.1f MB)",
                 name, arr.dtype, arr.shape[0] * arr.shape[1] * 4 / 1e6)
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(np.argwhere(~finite.all(axis=1))[0, 0])
        raise DataError(f"{name}: contains NaN or inf values (first at row {bad})")
    _check_magnitude(arr, name)
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
    computed exactly by :mod:`retrieval.groundtruth.exact` and cached. ``attributes`` (optional):
    one value per base vector (:class:`retrieval.filtering.Attributes`) for filtered search;
    they do not change the fingerprint. ``base_ids`` / ``query_ids`` (optional): the caller's
    id of each base vector / query (:class:`retrieval.ids.CallerIds`); without them a vector's
    id is its row number. Indexes, ground truth and filters work over row positions; saved
    retrieved ids are mapped back to the caller's ids.
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
    #: a cheap key that determines the content (files' path + size + mtime and the metric,
    #: or a generator's arguments): the fingerprint is then hashed once and cached under it
    content_key: str = ""
    base_ids: CallerIds | None = None
    query_ids: CallerIds | None = None

    def __repr__(self) -> str:  # the arrays' shapes, not their contents
        gt = "" if self.gt_ids is None else f", gt_ids {self.gt_ids.shape}"
        return (f"VectorDataset(name={self.name!r}, metric={self.metric!r}, "
                f"base {self.base.shape} {self.base.dtype}, queries {self.queries.shape}{gt}"
                + ("" if self.attributes is None else f", attributes {self.attributes.names}")
                + ("" if self.base_ids is None else f", base ids {self.base_ids.ids.dtype}")
                + ")")

    def __post_init__(self) -> None:
        check_metric(self.metric, where=f"dataset '{self.name}'")
        base = as_matrix(self.base, f"dataset '{self.name}' base vectors", mapped=True)
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
        for role, ids, n in (("base", self.base_ids, base.shape[0]),
                             ("query", self.query_ids, queries.shape[0])):
            if ids is not None and ids.n != n:
                raise DataError(f"dataset '{self.name}': {ids.n} {role} ids for {n} {role} "
                                f"vectors (one id per vector)")

    @classmethod
    def from_arrays(
        cls,
        base: object,
        queries: object,
        metric: str,
        *,
        name: str = "arrays",
        gt_ids: object | None = None,
        ids: object | None = None,
        query_ids: object | None = None,
    ) -> VectorDataset:
        """A dataset from in-memory vectors (numpy arrays or anything ``np.asarray`` takes):
        ``base`` (n, dim), ``queries`` (m, dim), ``metric`` l2 | ip | cosine (rwb's distances:
        lower is closer). Checked like files are (shape, dimension, NaN/inf: DataError).

        Ground truth is computed exactly when the dataset is first evaluated
        (:func:`retrieval.groundtruth.exact.ground_truth`: Faiss flat search, cached by the data's
        fingerprint); pass ``gt_ids`` (m, >= k neighbour ids) to use known neighbours instead.
        ``ids`` / ``query_ids`` (a manifest's fields of those names): the caller's id of each
        base vector / query (int64 >= 0 or strings, distinct); results and saved ids are then
        in these ids (``gt_ids`` stays in row numbers).
        """
        checked = check_metric(metric, where=f"dataset '{name}'")
        base_ids = None if ids is None else CallerIds(as_ids(ids, f"dataset '{name}' ids"))
        ids = None
        if gt_ids is not None:
            ids = np.asarray(gt_ids)
            if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
                raise DataError(f"dataset '{name}' gt_ids: expected a 2-d integer matrix "
                                f"(n_queries, depth); received shape {ids.shape}, dtype "
                                f"{ids.dtype}")
            ids = ids.astype(np.int64)
        ds = cls(name=name, base=base, queries=queries, metric=checked, gt_ids=ids,  # type: ignore[arg-type]
                 source="in-memory arrays", info={"origin": "from_arrays"},
                 base_ids=base_ids,
                 query_ids=None if query_ids is None else CallerIds(
                     as_ids(query_ids, f"dataset '{name}' query_ids")))
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

    @property
    def out_of_core(self) -> bool:
        """Whether the base is memory-mapped (read in chunks, never materialised)."""
        return is_out_of_core(self.base)

    @cached_property
    def fingerprint(self) -> str:
        """sha256 (hex, 16 chars) of the base and query bytes (float32, row-major) and the
        metric; hashed chunk by chunk, and cached on disk under :attr:`content_key` when set."""
        return cached_fingerprint(self.content_key, self._hash) if self.content_key \
            else self._hash()

    def _hash(self) -> str:
        from retrieval.phases import phase

        with phase("fingerprint"):
            return self._sha256()

    def _sha256(self) -> str:
        from retrieval.phases import report

        h = hashlib.sha256()
        h.update(self.metric.encode())
        total = self.n_base + self.n_queries
        done = 0
        for arr in (self.base, self.queries):
            h.update(str(arr.shape).encode())
            for _, chunk in base_chunks(arr, metric="l2"):
                h.update(chunk.data)
                done += chunk.shape[0]
                report("fingerprint", done, total, f"{self.name}: rows hashed")
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
            base_ids=self.base_ids,
            query_ids=None if self.query_ids is None else CallerIds(self.query_ids.ids[idx]),
        )


def mapped_file(x: object) -> str | None:
    """The file behind a memory-mapped matrix (None for an in-memory one)."""
    obj: object = x
    for _ in range(32):
        name = getattr(obj, "filename", None)
        if isinstance(obj, np.memmap) and name:
            return str(name)
        obj = getattr(obj, "base", None)
        if obj is None:
            return None
    return None


def footprint(ds: VectorDataset) -> dict[str, object]:
    """Sizes of a dataset: ``base_bytes`` (as float32, bytes), ``on_disk_bytes`` (the size of
    the memory-mapped base file, None when the base is in memory) and ``out_of_core``."""
    path = mapped_file(ds.base)
    disk = None
    if path is not None:
        try:
            disk = Path(path).stat().st_size
        except OSError:
            disk = None
    return {"base_bytes": ds.n_base * ds.dim * 4, "on_disk_bytes": disk,
            "out_of_core": ds.out_of_core}


def file_key(*paths: str | Path, extra: object = None) -> str:
    """A content key (see :attr:`VectorDataset.content_key`) from files' resolved path, size,
    modification time (ns), and what a user cannot set: device, inode and status-change time
    (ctime, ns; a file replaced with the same size and mtime by ``cp -p`` or ``touch -r`` gets a
    new ctime), and ``extra`` (e.g. the metric); "" when a file is missing."""
    parts: list[object] = [extra]
    for p in paths:
        try:
            st = Path(p).stat()
        except OSError:
            return ""
        parts.append([str(Path(p).resolve()), st.st_size, st.st_mtime_ns, st.st_dev,
                      st.st_ino, st.st_ctime_ns])
    return json.dumps(parts, default=str)


def _fingerprint_dir() -> Path:
    from retrieval.paths import cache_dir

    return cache_dir() / "fingerprints"


def cached_fingerprint(key: str, compute: object) -> str:
    """The fingerprint stored under ``key`` (a content key), else ``compute()`` stored there.

    The file is ``<cache>/fingerprints/<sha256(key)[:24]>.json`` holding the key and the value;
    a changed file (size, mtime, inode or ctime: see :func:`file_key`) makes a new key, so the
    full hash runs again."""
    assert callable(compute)
    path = _fingerprint_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("key") == key and isinstance(saved.get("fingerprint"), str):
            return str(saved["fingerprint"])
    except (OSError, ValueError):
        pass
    value = str(compute())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"key": key, "fingerprint": value}, fh)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache: the hash is recomputed next time
        log.info("fingerprint cache not written (%s)", exc)
    return value


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
