"""A seeded synthetic dataset that is hard enough to index.

Points are drawn from a mixture of anisotropic Gaussian clusters whose per-dimension scale decays
(a power-law spectrum, like real embeddings), with cluster sizes that vary; queries come from the
same distribution (not copies of base points). Uniform noise would make every ANN index look bad
and every parameter look the same; this does not.

With ``attributes=True`` every base vector also gets (from a separate seeded stream, so the
vectors are the same as without):

- ``uniform``: int in [0, 1_000_000), independent of the vectors (uncorrelated filters);
- ``clustered``: int in [0, 1_000_000); with probability ``correlation`` it lies in its
  cluster's slot of the range (slot ``c`` = [c, c+1) * 1e6 / n_clusters), else uniform: a range
  filter then matches whole clusters (correlation 1) or scattered points (0);
- ``tag``: one label of ``t0..t19`` with Zipf-like frequencies, independent of the vectors;
- ``cluster``: the label ``c<cluster>`` (perfectly correlated).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import Metric, VectorDataset, check_metric, release_pages, row_chunks
from retrieval.errors import DataError, param_error
from retrieval.filtering.attrs import Attributes, LabelColumn

log = logging.getLogger(__name__)

#: above this many base vectors the base is generated in chunks into a memory-mapped file
CHUNKED_ABOVE = 2_000_000
#: default rows per generated chunk (the chunking is part of the data's definition)
DEFAULT_CHUNK_ROWS = 1 << 20


#: bounds of a synthetic dataset: vectors, dimension, and the base's bytes (float32)
MAX_N, MAX_DIM, MAX_BASE_BYTES = 2_000_000_000, 65_536, 10**12


def make_synthetic(
    n: int = 20_000,
    dim: int = 96,
    n_queries: int = 500,
    *,
    n_clusters: int = 64,
    decay: float = 0.3,
    cluster_spread: float = 1.5,
    metric: Metric = "l2",
    seed: int = 0,
    name: str | None = None,
    attributes: bool = False,
    correlation: float = 1.0,
    chunk_rows: int | None = None,
) -> VectorDataset:
    """Clustered vectors with a decaying spectrum (float32, deterministic for a seed).

    ``chunk_rows`` (default: :data:`DEFAULT_CHUNK_ROWS` when ``n`` > :data:`CHUNKED_ABOVE`,
    else the whole base in one draw) generates the base chunk by chunk, each chunk from its own
    seeded stream, into a ``.npy`` file in the cache folder (``<cache>/synthetic/``, made once,
    then memory-mapped): N up to 10M and more without holding the base in memory. The chunked
    data differ from the one-draw data of the same seed (the streams differ); for one
    ``chunk_rows`` they are the same on every run and machine."""
    for field, value, low, high in (
        ("n", n, 1, MAX_N),
        ("dim", dim, 2, MAX_DIM),
        ("n_queries", n_queries, 1, MAX_N),
        ("n_clusters", n_clusters, 1, MAX_N),
    ):
        if not low <= int(value) <= high:
            raise param_error(field, f"an integer in [{low}, {high:,}]", value,
                              where="synthetic dataset")
    if int(n) * int(dim) * 4 > MAX_BASE_BYTES:
        raise param_error("n", f"n x dim x 4 bytes <= {MAX_BASE_BYTES:,} (1 TB; dim {dim})", n,
                          where="synthetic dataset")
    if not 0.0 <= decay <= 3.0:
        raise param_error("decay", "in [0, 3]", decay, where="synthetic dataset")
    if not 0.0 <= correlation <= 1.0:
        raise param_error("correlation", "in [0, 1]", correlation, where="synthetic dataset")
    check_metric(metric, where="synthetic dataset")
    if chunk_rows is None and n > CHUNKED_ABOVE:
        chunk_rows = DEFAULT_CHUNK_ROWS
    if chunk_rows is not None and int(chunk_rows) < 1:
        raise param_error("chunk_rows", "an integer >= 1", chunk_rows, where="synthetic dataset")
    args = {"n": n, "dim": dim, "n_queries": n_queries, "n_clusters": n_clusters,
            "decay": decay, "cluster_spread": cluster_spread, "metric": metric, "seed": seed,
            "chunk_rows": chunk_rows, "numpy": np.__version__, "generator": 1}
    rng = np.random.default_rng(seed)
    scales = (np.arange(1, dim + 1, dtype=np.float64) ** -decay).astype(np.float32)
    centers = rng.standard_normal((n_clusters, dim)).astype(np.float32) * scales * 3.0
    weights = rng.dirichlet(np.full(n_clusters, 2.0))
    # a random rotation so that the spectrum is not axis-aligned
    with _one_blas_thread():
        q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    rot = q.astype(np.float32)

    drawn: list[np.ndarray] = []

    def draw(m: int) -> np.ndarray:
        labels = rng.choice(n_clusters, size=m, p=weights)
        drawn.append(labels)
        noise = rng.standard_normal((m, dim)).astype(np.float32) * scales * cluster_spread
        return _rotate(centers[labels] + noise, rot)

    if chunk_rows is None:
        base = draw(n)
        queries = draw(n_queries)
    else:
        queries = draw(n_queries)
        drawn.clear()
        base, labels = _chunked_base(args, int(chunk_rows), centers, weights, scales, rot,
                                     cluster_spread, need_labels=attributes)
        drawn.append(labels)
    attrs = _attributes(drawn[0], n_clusters, correlation, seed) if attributes else None
    return VectorDataset(
        content_key=json.dumps(["synthetic", args], sort_keys=True),
        name=name or f"synthetic-{n}x{dim}",
        base=base,
        queries=queries,
        metric=metric,
        source=f"synthetic(n={n}, dim={dim}, n_queries={n_queries}, n_clusters={n_clusters}, "
        f"decay={decay}, seed={seed})",
        info={"generator": "make_synthetic", "seed": seed,
              **({"chunk_rows": int(chunk_rows)} if chunk_rows is not None else {}),
              **({"attribute_correlation": correlation} if attributes else {})},
        attributes=attrs,
    )


def _check_free_disk(folder: Path, need: int, n: int, dim: int) -> None:
    """DataError (one line) when ``folder``'s file system has fewer than ``need`` bytes free:
    a disk filling while the base is written would end in SIGBUS."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < need:
        raise DataError(f"synthetic {n:,}x{dim}: the base needs {need:,} bytes in '{folder}' "
                        f"(the rwb cache; RWB_CACHE_DIR moves it) and only {free:,} are free; "
                        f"free space or choose a smaller n / dim")


def _chunked_base(
    args: Mapping[str, object], rows: int, centers: np.ndarray, weights: np.ndarray,
    scales: np.ndarray, rot: np.ndarray, spread: float, *, need_labels: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """(memory-mapped base, cluster labels or an empty array): chunk ``c`` drawn from
    ``default_rng([seed, 2, c])``, written once into ``<cache>/synthetic/<key>.npy``."""
    from retrieval.paths import cache_dir

    n, dim, seed = int(args["n"]), int(args["dim"]), int(args["seed"])  # type: ignore[call-overload]
    key = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()[:20]
    path = cache_dir() / "synthetic" / f"{key}.npy"
    labels_all = np.empty(n if need_labels else 0, dtype=np.int64)
    k = centers.shape[0]

    def chunk(c: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        r = np.random.default_rng([seed, 2, c])
        lab = r.choice(k, size=hi - lo, p=weights)
        noise = r.standard_normal((hi - lo, dim)).astype(np.float32) * scales * spread
        return _rotate(centers[lab] + noise, rot), lab

    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        _check_free_disk(path.parent, n * dim * 4 + 4096, n, dim)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
        try:
            out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, dim))
            for c, (lo, hi) in enumerate(row_chunks(n, rows)):
                out[lo:hi], lab = chunk(c, lo, hi)
                release_pages(out[lo:hi])  # written pages go to the page cache, not resident
                if need_labels:
                    labels_all[lo:hi] = lab
                if c % 8 == 7:
                    log.info("synthetic %dx%d: %d of %d rows generated", n, dim, hi, n)
            out.flush()
            del out
            os.replace(tmp, path)
        except BaseException:  # a full disk, Ctrl-C: no half-written file left in the cache
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
    elif need_labels:  # labels are cheap to redraw (no vectors kept)
        for c, (lo, hi) in enumerate(row_chunks(n, rows)):
            r = np.random.default_rng([seed, 2, c])
            labels_all[lo:hi] = r.choice(k, size=hi - lo, p=weights)
    base = np.load(Path(path), mmap_mode="r", allow_pickle=False)
    return base, labels_all


def _attributes(cluster: np.ndarray, n_clusters: int, correlation: float,
                seed: int) -> Attributes:
    rng = np.random.default_rng([seed, 1])
    n = cluster.shape[0]
    span = 1_000_000
    uniform = np.asarray(rng.integers(0, span, size=n), dtype=np.int64)
    slot = span // n_clusters
    in_slot = cluster * slot + rng.integers(0, max(slot, 1), size=n)
    clustered = np.where(rng.random(n) < correlation, in_slot, rng.integers(0, span, size=n))
    zipf = 1.0 / np.arange(1, 21)
    tags = np.asarray(rng.choice(20, size=n, p=zipf / zipf.sum()))
    return Attributes(n, {"uniform": uniform,
                          "clustered": clustered.astype(np.int64)},
                      {"tag": LabelColumn.from_rows(f"t{t}" for t in tags),
                       "cluster": LabelColumn.from_rows(f"c{c}" for c in cluster)})


def _one_blas_thread() -> Any:
    """BLAS on one thread: a float32 matrix product's last bits depend on how many threads
    split it, and the same spec must give the same bytes (and fingerprint) on every machine,
    Ray node and ``OMP_NUM_THREADS``."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _rotate(x: np.ndarray, rot: np.ndarray) -> np.ndarray:
    with _one_blas_thread():
        return np.ascontiguousarray(x @ rot, dtype=np.float32)
