"""A ``.bvecs`` (uint8) base stays memory-mapped as uint8 and is converted to float32 chunk by
chunk where it is read (ground truth, fingerprint, index builds): the results equal the path
that reads the whole file into memory as float32 (issue 21)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval import data as rdata
from retrieval.data import VectorDataset
from retrieval.groundtruth.exact import exact_distances, ground_truth
from retrieval.indexes.registry import create_index
from retrieval.loaders.vectors import load_texmex, write_bvecs


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    base = rng.integers(0, 256, (3000, 16)).astype(np.uint8)
    queries = rng.integers(0, 256, (40, 16)).astype(np.uint8)
    return (write_bvecs(tmp_path / "b.bvecs", base), write_bvecs(tmp_path / "q.bvecs", queries),
            base, queries)


@pytest.mark.parametrize("metric", ["l2", "cosine"])
def test_mapped_bvecs_equals_in_memory(files: tuple[Path, Path, np.ndarray, np.ndarray],
                                       tmp_path: Path, metric: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    b, q, base, queries = files
    monkeypatch.setattr(rdata, "CHUNK_BYTES", 1024 * 16 * 4)  # 1024-row chunks: 3 of them
    mapped = load_texmex(b, q, metric=metric)  # type: ignore[arg-type]
    assert mapped.out_of_core and mapped.base.dtype == np.uint8  # never made float32 whole
    memory = VectorDataset.from_arrays(base.astype(np.float32), queries.astype(np.float32),
                                       metric)
    assert mapped.fingerprint == memory.fingerprint
    got = ground_truth(mapped, 10, cache=tmp_path / "gt-mapped")
    ref = ground_truth(memory, 10, cache=tmp_path / "gt-memory")
    assert np.array_equal(got.ids, ref.ids)
    assert np.array_equal(got.distances, ref.distances)
    assert np.array_equal(exact_distances(mapped, ref.ids), exact_distances(memory, ref.ids))
    for backend, build, search in (("hnswlib", {"M": 8, "ef_construction": 40},
                                    {"ef_search": 20}),
                                   ("faiss-ivf", {"nlist": 8}, {"nprobe": 2})):
        ids = {}
        for name, ds in (("mapped", mapped), ("memory", memory)):
            idx = create_index(backend, 16, metric, build)  # type: ignore[arg-type]
            try:
                idx.build(ds.base)
                idx.set_search_params(**search)
                ids[name] = idx.search(memory.queries, 10).ids
            finally:
                idx.close()
        assert np.array_equal(ids["mapped"], ids["memory"]), backend


def test_mapped_bvecs_other_engines_get_float32(
        files: tuple[Path, Path, np.ndarray, np.ndarray]) -> None:
    """An engine that does not read chunks (Qdrant) gets the mapped uint8 base as float32
    (its build is not bit-reproducible: recall against the exact neighbours is checked)."""
    b, q, _, _ = files
    ds = load_texmex(b, q)
    ref = ground_truth(ds, 10, use_cache=False).ids
    idx = create_index("qdrant", 16, "l2", {"m": 16, "ef_construct": 100})
    try:
        idx.build(ds.base)
        idx.set_search_params(hnsw_ef=100)
        got = idx.search(ds.queries, 10).ids
    finally:
        idx.close()
    recall = np.mean([len(set(a) & set(r)) / 10 for a, r in zip(got.tolist(), ref.tolist())])
    assert recall >= 0.9


def test_as_matrix_keeps_a_mapped_uint8_only_when_asked(
        files: tuple[Path, Path, np.ndarray, np.ndarray]) -> None:
    from retrieval.data import as_matrix, is_out_of_core
    from retrieval.loaders.vectors import map_vecs

    b, _, base, _ = files
    mm = map_vecs(b, np.uint8, "bvecs")
    kept = as_matrix(mm, "x", mapped=True)
    assert kept.dtype == np.uint8 and is_out_of_core(kept)
    made = as_matrix(mm, "x")  # an engine that reads the whole matrix gets float32
    assert made.dtype == np.float32 and np.array_equal(made, base.astype(np.float32))
