"""Vector files: ann-benchmarks HDF5, TEXMEX ``.fvecs/.ivecs/.bvecs`` and NumPy ``.npy``.

Ground truth that comes with the files is kept in ``VectorDataset.gt_ids`` (int64, -1 = none);
``gt_distances`` are given in rwb's convention (lower is closer: l2 = squared Euclidean,
ip = -inner product, cosine = 1 - cos), recomputed from the ids so that they match exactly what
rwb would compute, whatever convention the file used.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import (
    Metric,
    VectorDataset,
    as_matrix,
    check_metric,
    chunk_rows,
    file_key,
    release_pages,
    row_chunks,
)
from retrieval.errors import DataError, DataNotFound
from retrieval.ids import CallerIds, as_ids

log = logging.getLogger(__name__)

#: ann-benchmarks ``distance`` attribute -> rwb metric
HDF5_METRICS: dict[str, Metric] = {
    "euclidean": "l2",
    "l2": "l2",
    "angular": "cosine",
    "cosine": "cosine",
    "dot": "ip",
    "ip": "ip",
    "inner_product": "ip",
}


def _existing_file(path: str | Path, what: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        try:
            where = p.resolve()
        except RuntimeError:  # pathlib: "Symlink loop from ..."
            raise DataError(f"{what}: {path} is a symbolic link loop (it never reaches a "
                            f"file); point it at the data file") from None
        if p.is_dir():
            raise DataError(f"{what}: file is a folder, not a file: {path} (looked in {where})")
        raise DataNotFound(f"{what}: file not found: {path} (looked in {where})")
    return p


def _stem_name(path: Path) -> str:
    name = path.name
    for suffix in (".hdf5", ".h5", ".fvecs", ".bvecs", ".ivecs", ".npy"):
        name = name.removesuffix(suffix)
    return name


def exact_distances(
    base: np.ndarray, queries: np.ndarray, ids: np.ndarray, metric: Metric
) -> np.ndarray:
    """Distances (float32, rwb convention) from each query to ``base[ids]``; +inf where id < 0.

    Computed in float64, a few MB at a time."""
    out = np.full(ids.shape, np.inf, dtype=np.float32)
    chunk = max(1, 4_000_000 // max(1, ids.shape[1] * base.shape[1]))
    if metric == "cosine":
        bn = np.linalg.norm(base, axis=1)
        bn[bn == 0] = 1.0
        qn = np.linalg.norm(queries, axis=1)
        qn[qn == 0] = 1.0
    for s in range(0, ids.shape[0], chunk):
        idx = ids[s : s + chunk]
        valid = idx >= 0
        safe = np.where(valid, idx, 0)
        neigh = base[safe].astype(np.float64)  # (c, k, d)
        q = queries[s : s + chunk, None, :].astype(np.float64)
        if metric == "l2":
            d = ((neigh - q) ** 2).sum(-1)
        elif metric == "ip":
            d = -(neigh * q).sum(-1)
        else:
            d = 1.0 - (neigh * q).sum(-1) / (bn[safe] * qn[s : s + chunk, None])
        out[s : s + chunk] = np.where(valid, d, np.inf).astype(np.float32)
    return out


def _check_gt(gt: np.ndarray, n_queries: int, n_base: int, what: str) -> np.ndarray:
    gt = np.asarray(gt)
    if gt.ndim != 2:
        raise DataError(f"{what}: ground truth must be 2-d (n_queries, k); received {gt.shape}")
    if not np.issubdtype(gt.dtype, np.integer):
        raise DataError(f"{what}: ground truth ids must be integers; received {gt.dtype}")
    if gt.shape[0] != n_queries:
        raise DataError(
            f"{what}: ground truth has {gt.shape[0]} rows but there are {n_queries} queries"
        )
    gt = gt.astype(np.int64)
    if gt.size and (gt.max() >= n_base or gt.min() < -1):
        raise DataError(
            f"{what}: ground truth ids must be in [0, {n_base}) (or -1); "
            f"received range [{gt.min()}, {gt.max()}]"
        )
    return np.ascontiguousarray(gt)


# --------------------------------------------------------------------------- HDF5


def _read_hdf5(fh: Any, what: str, metric: Metric | None) -> tuple[
    list[str], Metric, np.ndarray, np.ndarray, np.ndarray | None, bool
]:
    """(keys, metric, base, queries, raw neighbors or None, has distances) of an open file."""
    keys = sorted(fh.keys())
    missing = [k for k in ("train", "test") if k not in keys]
    if missing:
        raise DataError(
            f"{what}: missing dataset(s) {', '.join(missing)}; keys found: "
            f"{', '.join(keys) or '(none)'}; expected train, test[, neighbors, distances]"
        )
    if metric is None:
        raw = fh.attrs.get("distance")
        if raw is None:
            raise DataError(
                f"{what}: no 'distance' attribute; pass metric= (one of l2, ip, cosine)"
            )
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        key = str(raw).lower()
        if key not in HDF5_METRICS:
            raise DataError(
                f"{what}: attribute 'distance' must be one of "
                f"{', '.join(sorted(HDF5_METRICS))}; received {raw!r}"
            )
        metric = HDF5_METRICS[key]
    metric = check_metric(metric, where=what)
    base = as_matrix(_hdf5_map(fh["train"]), f"{what}: train", mapped=True)
    queries = as_matrix(fh["test"][()], f"{what}: test", dim=base.shape[1])
    gt_raw = fh["neighbors"][()] if "neighbors" in keys else None
    return keys, metric, base, queries, gt_raw, "distances" in keys


def _hdf5_map(dset: Any) -> np.ndarray:
    """A read-only memory map of an HDF5 dataset stored contiguous and uncompressed (as
    ann-benchmarks writes them); otherwise (chunked, compressed, empty) the data read whole."""
    try:
        offset = dset.id.get_offset()
    except (AttributeError, OSError, RuntimeError):
        offset = None
    if (offset is None or dset.chunks is not None or dset.compression is not None
            or dset.ndim != 2 or dset.size == 0 or dset.dtype != np.float32):
        return np.asarray(dset[()])
    return np.memmap(dset.file.filename, dtype=dset.dtype, mode="r", offset=int(offset),
                     shape=tuple(dset.shape), order="C")


def _hdf5_ids(fh: Any, key: str, n: int, what: str) -> CallerIds:
    """The caller ids in the file's 1-d dataset ``key`` (integers, or strings / bytes)."""
    if key not in fh:
        raise DataError(f"{what}: no dataset '{key}' (field 'ids' / 'query_ids' names a 1-d "
                        f"dataset of ids in the file); keys found: {', '.join(sorted(fh.keys()))}")
    raw = np.asarray(fh[key][()])
    if raw.dtype.kind == "S" or raw.dtype == object:
        raw = np.array([v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in raw])
    ids = as_ids(raw, f"{what}: '{key}'")
    if ids.shape[0] != n:
        raise DataError(f"{what}: '{key}' holds {ids.shape[0]} ids for {n} vectors (one id per "
                        f"vector)")
    return CallerIds(ids)


def load_hdf5(
    path: str | Path, *, name: str | None = None, metric: Metric | None = None,
    ids: str | None = None, query_ids: str | None = None,
) -> VectorDataset:
    """Load an ann-benchmarks HDF5 file: datasets ``train`` (base) and ``test`` (queries),
    optional ``neighbors`` (ground-truth ids) and ``distances``; attribute ``distance``
    (euclidean -> l2, angular -> cosine, dot -> ip) unless ``metric`` is given. ``ids`` /
    ``query_ids``: names of 1-d datasets in the file holding the caller's ids of the base
    vectors / queries; with ``ids``, ``neighbors`` holds those ids.
    """
    import h5py

    p = _existing_file(path, "hdf5 dataset")
    what = f"hdf5 dataset {p}"
    try:
        fh = h5py.File(p, "r")
    except OSError as exc:
        raise DataError(f"{what}: not a readable HDF5 file ({exc})") from None
    with fh:
        try:
            keys, metric, base, queries, gt_raw, has_distances = _read_hdf5(fh, what, metric)
            base_ids = None if ids is None else _hdf5_ids(fh, ids, base.shape[0], what)
            q_ids = None if query_ids is None else _hdf5_ids(fh, query_ids, queries.shape[0],
                                                             what)
        except (OSError, RuntimeError, KeyError, TypeError) as exc:
            # damage met anywhere in the file: the group index, an attribute (e.g. a bad
            # global heap holding the 'distance' string), a data block
            raise DataError(f"{what}: damaged HDF5 content ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else 'unreadable'})") from None
    gt_ids = gt_dist = None
    if gt_raw is not None:
        if base_ids is not None:  # neighbours in the caller's ids: as row positions
            gt_raw = base_ids.positions(np.asarray(gt_raw), f"{what}: neighbors")
        gt_ids = _check_gt(gt_raw, queries.shape[0], base.shape[0], what)
        if has_distances:
            gt_dist = exact_distances(base, queries, gt_ids, metric)
    return VectorDataset(
        content_key=file_key(p, extra=["hdf5", metric]),
        name=name or _stem_name(p),
        base=base,
        queries=queries,
        metric=metric,
        gt_ids=gt_ids,
        gt_distances=gt_dist,
        source=f"hdf5:{p.resolve()}",
        info={"format": "ann-benchmarks hdf5", "file": str(p.resolve()), "keys": keys},
        base_ids=base_ids,
        query_ids=q_ids,
    )


def write_hdf5(
    path: str | Path,
    train: np.ndarray,
    test: np.ndarray,
    *,
    neighbors: np.ndarray | None = None,
    distances: np.ndarray | None = None,
    distance: str = "euclidean",
) -> Path:
    """Write an ann-benchmarks style HDF5 file (for tests and small exports)."""
    import h5py

    p = Path(path)
    with h5py.File(p, "w") as fh:
        fh.attrs["distance"] = distance
        fh.create_dataset("train", data=np.asarray(train))
        fh.create_dataset("test", data=np.asarray(test))
        if neighbors is not None:
            fh.create_dataset("neighbors", data=np.asarray(neighbors, dtype=np.int32))
        if distances is not None:
            fh.create_dataset("distances", data=np.asarray(distances, dtype=np.float32))
    return p


# --------------------------------------------------------------------------- TEXMEX


def _read_vecs(path: str | Path, dtype: type[np.generic], what: str) -> np.ndarray:
    """Each record: int32 dimension d, then d values of ``dtype``."""
    p = _existing_file(path, what)
    raw = np.fromfile(p, dtype=np.uint8)
    if raw.size == 0:
        raise DataError(f"{what} {p}: file is empty")
    if raw.size < 4:
        raise DataError(f"{what} {p}: truncated ({raw.size} bytes)")
    dim = int(raw[:4].view(np.int32)[0])
    item = np.dtype(dtype).itemsize
    record = 4 + dim * item
    if dim <= 0 or dim > 1_000_000:
        raise DataError(f"{what} {p}: bad leading dimension {dim}; not a *vecs file?")
    if raw.size % record:
        raise DataError(
            f"{what} {p}: size {raw.size} bytes is not a multiple of the record size {record} "
            f"(dimension {dim}); truncated or wrong format"
        )
    rows = raw.reshape(-1, record)
    dims = rows[:, :4].copy().view(np.int32).ravel()
    if (dims != dim).any():
        bad = int(np.argmax(dims != dim))
        raise DataError(
            f"{what} {p}: record {bad} has dimension {dims[bad]}, the first has {dim}"
        )
    return np.ascontiguousarray(rows[:, 4:]).view(dtype).reshape(rows.shape[0], dim)


def map_vecs(path: str | Path, dtype: type[np.generic], what: str) -> np.ndarray:
    """Like :func:`_read_vecs`, but a read-only memory map: a strided ``(n, d)`` view that
    skips each record's dimension header (checked chunk by chunk, never read whole)."""
    p = _existing_file(path, what)
    size = p.stat().st_size
    if size < 4:
        raise DataError(f"{what} {p}: " + ("file is empty" if size == 0 else
                                           f"truncated ({size} bytes)"))
    dim = int(np.fromfile(p, dtype=np.int32, count=1)[0])
    item = np.dtype(dtype).itemsize
    record = 4 + dim * item
    if dim <= 0 or dim > 1_000_000:
        raise DataError(f"{what} {p}: bad leading dimension {dim}; not a *vecs file?")
    if size % record:
        raise DataError(
            f"{what} {p}: size {size} bytes is not a multiple of the record size {record} "
            f"(dimension {dim}); truncated or wrong format"
        )
    rec = np.dtype([("d", "<i4"), ("v", np.dtype(dtype), (dim,))])
    mm = np.memmap(p, dtype=rec, mode="r")
    for lo, hi in row_chunks(mm.shape[0], chunk_rows(dim, itemsize=item)):
        dims = np.array(mm["d"][lo:hi])
        release_pages(mm[lo:hi])  # the check touched every page: not kept resident
        if (dims != dim).any():
            bad = lo + int(np.argmax(dims != dim))
            raise DataError(
                f"{what} {p}: record {bad} has dimension {int(mm['d'][bad])}, the first has "
                f"{dim}"
            )
    return mm["v"]


def read_fvecs(path: str | Path) -> np.ndarray:
    """float32 ``(n, d)`` from a ``.fvecs`` file."""
    return _read_vecs(path, np.float32, "fvecs")


def read_ivecs(path: str | Path) -> np.ndarray:
    """int32 ``(n, d)`` from an ``.ivecs`` file (e.g. ground-truth ids)."""
    return _read_vecs(path, np.int32, "ivecs")


def read_bvecs(path: str | Path) -> np.ndarray:
    """uint8 ``(n, d)`` from a ``.bvecs`` file (SIFT1B)."""
    return _read_vecs(path, np.uint8, "bvecs")


def _write_vecs(path: str | Path, x: np.ndarray, dtype: type[np.generic]) -> Path:
    arr = np.ascontiguousarray(np.asarray(x), dtype=dtype)
    if arr.ndim != 2:
        raise DataError(f"write {path}: expected a 2-d array; received shape {arr.shape}")
    n, d = arr.shape
    header = np.full((n, 1), d, dtype=np.int32).view(np.uint8)
    body = arr.view(np.uint8).reshape(n, -1)
    p = Path(path)
    np.concatenate([header, body], axis=1).tofile(p)
    return p


def write_fvecs(path: str | Path, x: np.ndarray) -> Path:
    return _write_vecs(path, x, np.float32)


def write_ivecs(path: str | Path, x: np.ndarray) -> Path:
    return _write_vecs(path, x, np.int32)


def write_bvecs(path: str | Path, x: np.ndarray) -> Path:
    return _write_vecs(path, x, np.uint8)


def read_vectors(path: str | Path) -> np.ndarray:
    """Read by extension: ``.fvecs``, ``.bvecs``, ``.ivecs`` or ``.npy``."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".fvecs":
        return read_fvecs(p)
    if suffix == ".bvecs":
        return read_bvecs(p)
    if suffix == ".ivecs":
        return read_ivecs(p)
    if suffix == ".npy":
        return read_npy(p, "npy")
    raise DataError(
        f"vectors {path}: unknown file type '{suffix}'; allowed: .fvecs, .bvecs, .ivecs, .npy"
    )


def _map_base(path: str | Path) -> np.ndarray:
    """A base file memory-mapped (``.fvecs``, ``.bvecs``, ``.npy``), else read whole."""
    suffix = Path(path).suffix.lower()
    if suffix == ".fvecs":
        return map_vecs(path, np.float32, "fvecs")
    if suffix == ".bvecs":
        return map_vecs(path, np.uint8, "bvecs")
    if suffix == ".npy":
        return read_npy(path, "npy", mmap=True)
    return read_vectors(path)


def load_texmex(
    base: str | Path,
    queries: str | Path,
    groundtruth: str | Path | None = None,
    metric: Metric = "l2",
    *,
    name: str | None = None,
) -> VectorDataset:
    """TEXMEX (SIFT/GIST) files: base and queries ``.fvecs``/``.bvecs``, ground truth
    ``.ivecs`` (ids only; ``gt_distances`` computed from them in rwb's convention)."""
    metric = check_metric(metric, where="texmex dataset")
    b = as_matrix(_map_base(base), f"texmex base {base}", mapped=True)
    q = as_matrix(read_vectors(queries), f"texmex queries {queries}", dim=b.shape[1])
    gt_ids = gt_dist = None
    if groundtruth is not None:
        gt_ids = _check_gt(read_vectors(groundtruth), q.shape[0], b.shape[0],
                           f"texmex groundtruth {groundtruth}")
        gt_dist = exact_distances(b, q, gt_ids, metric)
    files = {"base": base, "queries": queries, "groundtruth": groundtruth}
    return VectorDataset(
        content_key=file_key(base, queries, extra=["texmex", metric]),
        name=name or _stem_name(Path(base)).removesuffix("_base"),
        base=b,
        queries=q,
        metric=metric,
        gt_ids=gt_ids,
        gt_distances=gt_dist,
        source=f"texmex:{Path(base).resolve()}",
        info={"format": "texmex", **{k: str(v) for k, v in files.items() if v is not None}},
    )


# --------------------------------------------------------------------------- NumPy


def _too_big(p: Path, what: str) -> str:
    size = p.stat().st_size
    return (f"{what} {p}: {size:,} bytes do not fit this process's memory or address space "
            f"(ulimit -v / a container limit); raise the limit or use a smaller file")


def read_npy(path: str | Path, what: str, *, mmap: bool = False) -> np.ndarray:
    p = _existing_file(path, what)
    try:
        with open(p, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise DataError(f"{what} {p}: cannot be read ({exc.strerror})") from None
    if magic != b"\x93NUMPY":  # numpy would suggest allow_pickle for any other file
        raise DataError(f"{what} {p}: not an .npy file (it does not start with NumPy's "
                        f"\\x93NUMPY header; received {magic!r})")
    try:
        if mmap:
            try:
                return np.load(p, allow_pickle=False, mmap_mode="r")
            except OSError as exc:
                if exc.errno == errno.ENOMEM:  # never a silent full read instead
                    raise DataError(_too_big(p, what)) from None
            except ValueError:  # e.g. an empty array cannot be mapped: read it
                pass
        return np.load(p, allow_pickle=False)
    except MemoryError:
        raise DataError(_too_big(p, what)) from None
    except (ValueError, OSError, EOFError) as exc:
        if "pickle" in str(exc):  # an object array: never unpickled (it could run code)
            raise DataError(f"{what} {p}: the .npy file holds Python objects (pickled); rwb "
                            f"reads numeric arrays only") from None
        raise DataError(f"{what} {p}: not a readable .npy file ({exc})") from None


def load_npy(
    base: str | Path,
    queries: str | Path,
    metric: Metric,
    *,
    groundtruth: str | Path | None = None,
    name: str | None = None,
) -> VectorDataset:
    """Base and queries from ``.npy`` matrices; optional ground-truth ids ``.npy``."""
    metric = check_metric(metric, where="npy dataset")
    b = as_matrix(read_npy(base, "npy base", mmap=True), f"npy base {base}", mapped=True)
    q = as_matrix(read_npy(queries, "npy queries"), f"npy queries {queries}", dim=b.shape[1])
    gt_ids = gt_dist = None
    if groundtruth is not None:
        gt_ids = _check_gt(read_npy(groundtruth, "npy groundtruth"), q.shape[0], b.shape[0],
                           f"npy groundtruth {groundtruth}")
        gt_dist = exact_distances(b, q, gt_ids, metric)
    return VectorDataset(
        content_key=file_key(base, queries, extra=["npy", metric]),
        name=name or _stem_name(Path(base)),
        base=b,
        queries=q,
        metric=metric,
        gt_ids=gt_ids,
        gt_distances=gt_dist,
        source=f"npy:{Path(base).resolve()}",
        info={"format": "npy", "base": str(base), "queries": str(queries)},
    )
