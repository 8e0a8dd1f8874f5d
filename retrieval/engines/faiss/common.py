"""Helpers shared by the Faiss backends (not a backend: no ``register`` here), and the Faiss
selector of a row filter (in-engine filtered search)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import Metric, base_chunks, is_out_of_core, normalize_rows
from retrieval.errors import DataError
from retrieval.filtering.rows import RowFilter
from retrieval.indexes.base import SearchResult


def faiss_module() -> Any:
    import faiss

    return faiss


def faiss_metric(metric: Metric) -> int:
    faiss = faiss_module()
    return int(faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT)


def prepare(x: np.ndarray, metric: Metric) -> np.ndarray:
    """float32 C-contiguous; rows normalised for cosine."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    return normalize_rows(x) if metric == "cosine" else x


def add_rows(index: Any, x: np.ndarray, metric: Metric) -> None:
    """``index.add`` of ``x`` prepared for the metric: in one call for an in-memory matrix,
    chunk by chunk for a memory-mapped one (never copied whole)."""
    if not is_out_of_core(x):
        index.add(prepare(x, metric))
        return
    for _, chunk in base_chunks(x, metric=metric):
        index.add(chunk)


def train_rows(x: np.ndarray, rows: np.ndarray | None, metric: Metric) -> np.ndarray:
    """The training sample ``x[rows]`` (all rows when None) prepared for the metric."""
    if rows is None:
        return prepare(x, metric)
    return prepare(np.asarray(x[rows]), metric)


def to_result(distances: np.ndarray, ids: np.ndarray, metric: Metric) -> SearchResult:
    """Convert faiss output (L2: squared distance; IP: similarity) to rwb distances."""
    ids = ids.astype(np.int64, copy=False)
    d = distances.astype(np.float32, copy=False)
    if metric == "ip":
        d = -d
    elif metric == "cosine":
        d = 1.0 - d
    if has_missing(ids):
        d = np.where(ids < 0, np.float32(np.inf), d).astype(np.float32, copy=False)
    return SearchResult(ids=ids, distances=d)


def has_missing(ids: np.ndarray) -> bool:
    """Whether any id is -1. Faiss pads missing results at the end of a row, so only the last
    column is checked; a one-row result (the single-query hot path) is a scalar test."""
    if ids.shape[1] == 0:
        return False
    if ids.shape[0] == 1:
        return bool(ids[0, -1] < 0)
    return bool((ids[:, -1] < 0).any())


def serialized_bytes(index: Any) -> int:
    """Size in bytes of the serialized index (a measurement of the structure, not a guess)."""
    return int(faiss_module().serialize_index(index).size)


def version() -> str:
    return str(faiss_module().__version__)


def hot_call(
    index: Any, params: Any, k: int, metric: Metric
) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
    """The bare faiss call for the timed single-query path (rows normalised inside for cosine,
    as the adapter's own search does) and the conversion of its output to rwb distances."""
    if metric == "cosine":

        def call(x: np.ndarray) -> Any:
            return index.search(normalize_rows(x), k, params=params)

    else:

        def call(x: np.ndarray) -> Any:
            return index.search(x, k, params=params)

    def rows(raw: Any) -> tuple[np.ndarray, np.ndarray]:
        res = to_result(raw[0], raw[1], metric)
        return res.distances, res.ids

    return call, rows


@contextlib.contextmanager
def omp_threads(n: int, *, after: int) -> Iterator[None]:
    """``faiss.omp_set_num_threads(n)`` inside (a build), ``after`` once it ends (searches)."""
    faiss = faiss_module()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(after)


INDEX_FILE = "index.faiss"


def write_index(index: Any, folder: Path) -> list[str]:
    """``faiss.write_index`` into ``folder`` (Faiss checks every write and raises on a short
    one); returns the file names."""
    faiss_module().write_index(index, str(folder / INDEX_FILE))
    return [INDEX_FILE]


def read_index(folder: Path, n: int, dim: int, metric: Metric, where: str, *,
               mmap: bool = False) -> Any:
    """``faiss.read_index`` of :func:`write_index`'s file, checked: ``n`` vectors of ``dim``
    and the metric's Faiss metric type (DataError otherwise). ``mmap``: served from the file
    through the page cache (``IO_FLAG_MMAP``) instead of read into memory."""
    faiss = faiss_module()
    flags = faiss.IO_FLAG_MMAP if mmap else 0
    index = faiss.read_index(str(folder / INDEX_FILE), flags)
    if int(index.ntotal) != n or int(index.d) != dim or int(index.metric_type) != faiss_metric(
        metric
    ):
        raise DataError(f"{where}: snapshot holds {index.ntotal} vectors of dim {index.d} "
                        f"(metric type {index.metric_type}), expected {n} of dim {dim}")
    return index


def faiss_selector(flt: RowFilter) -> Any:
    """``faiss.IDSelectorBitmap`` over ``flt.bitmap`` (``flt`` keeps the bitmap alive)."""
    import faiss

    bitmap = flt.bitmap
    return faiss.IDSelectorBitmap(int(flt.mask.shape[0]), faiss.swig_ptr(bitmap))


def thread_settings(spec_threads: int | None) -> dict[str, Any]:
    """Faiss's OpenMP maximum for a run's provenance (faiss is imported for it when installed:
    cheap, no side effects; a core dependency, the exact search library)."""
    import importlib.util
    import sys

    if "faiss" not in sys.modules and importlib.util.find_spec("faiss") is not None:
        try:
            import faiss  # noqa: F401
        except ImportError:  # pragma: no cover - a broken install
            return {}
    if "faiss" not in sys.modules:
        return {}
    return {"faiss_omp_max_threads": int(sys.modules["faiss"].omp_get_max_threads())}


class MappedOpen:
    """``open_cold`` of the Faiss backends (:class:`retrieval.tune.cold.SupportsColdOpen`): the
    snapshot read with ``IO_FLAG_MMAP``, so searches page the file in from disk."""

    _mmap: bool = False

    def save_cold(self, folder: Path) -> None:
        """Write the built index into ``folder`` (its snapshot)."""
        self.save_snapshot(folder)  # type: ignore[attr-defined]  # SnapshotIndex's

    def open_cold(self, folder: Path, n: int) -> list[Path]:
        """Become the index saved in ``folder`` (``n`` vectors), served from its file through
        mmap; returns the files it serves from."""
        self._mmap = True
        try:
            self.load_snapshot(folder, n)  # type: ignore[attr-defined]  # SnapshotIndex's
        finally:
            self._mmap = False
        return [folder / INDEX_FILE]
