"""tune.build_search: derived: smaller-M Faiss HNSW graphs pruned from one larger build."""

from __future__ import annotations

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from retrieval.engines.faiss.derive import derive_hnsw, hnsw_arrays, mean_degree  # noqa: E402


def _data(n: int = 4000, d: int = 32, nq: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(20, d)).astype(np.float32) * 3
    x = (centers[rng.integers(0, 20, n)] + rng.normal(size=(n, d))).astype(np.float32)
    q = (centers[rng.integers(0, 20, nq)] + rng.normal(size=(nq, d))).astype(np.float32)
    return x, q


def _build(x: np.ndarray, m: int) -> object:
    faiss.omp_set_num_threads(1)
    index = faiss.IndexHNSWFlat(x.shape[1], m)
    index.hnsw.efConstruction = 64
    index.hnsw.rng = faiss.RandomGenerator(0)
    index.add(x)
    return index


def _recall(index: object, q: np.ndarray, truth: np.ndarray, ef: int) -> float:
    index.hnsw.efSearch = ef  # type: ignore[attr-defined]
    _, ids = index.search(q, 10)  # type: ignore[attr-defined]
    return float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, truth, strict=True)]))


def test_pruned_graph_is_a_valid_smaller_graph() -> None:
    x, q = _data()
    big = _build(x, 16)
    small, seconds = derive_hnsw(big, 8, "l2")
    assert seconds >= 0
    g, src = hnsw_arrays(small), hnsw_arrays(big)
    assert small.ntotal == big.ntotal and small.hnsw.nb_neighbors(0) == 16
    assert np.array_equal(g["levels"], src["levels"])  # the level structure is kept
    # every level-0 neighbour list is within the new cap; each neighbour is one of the
    # source's, or a reverse link (the neighbour lists this node: fill="reverse")
    for node in range(0, x.shape[0], 97):
        new = g["neighbors"][g["offsets"][node]: g["offsets"][node] + 16]
        old = src["neighbors"][src["offsets"][node]: src["offsets"][node] + 32]
        kept = set(new[new >= 0].tolist())
        assert kept
        for j in kept - set(old[old >= 0].tolist()):
            back = g["neighbors"][g["offsets"][j]: g["offsets"][j] + 16]
            assert node in set(back.tolist())
    # fill="nearest" keeps a subset of the source's lists
    near = hnsw_arrays(derive_hnsw(big, 8, "l2", fill="nearest")[0])
    for node in range(0, x.shape[0], 97):
        new = near["neighbors"][near["offsets"][node]: near["offsets"][node] + 16]
        old = src["neighbors"][src["offsets"][node]: src["offsets"][node] + 32]
        assert set(new[new >= 0].tolist()) <= set(old[old >= 0].tolist())
    assert mean_degree(small) <= 16
    # ids answered are ids of the base (0..n-1 here, Faiss's own numbering) and never -1
    _, ids = small.search(q, 10)
    assert ids.min() >= 0 and ids.max() < x.shape[0]


def test_derived_recall_close_to_a_real_build() -> None:
    x, q = _data()
    truth = faiss.knn(q, x, 10)[1]
    derived, _ = derive_hnsw(_build(x, 16), 8, "l2")
    real = _build(x, 8)
    for ef in (16, 32, 64):
        # the shortcut's error on this data: within 0.06 recall points of a real M=8 build
        assert abs(_recall(derived, q, truth, ef) - _recall(real, q, truth, ef)) <= 0.06
    assert _recall(derived, q, truth, 64) > 0.9


def test_smaller_m_than_one_and_larger_than_source_refused() -> None:
    x, _ = _data(n=500)
    big = _build(x, 8)
    for bad in (0, 9):
        with pytest.raises(ValueError, match=r"derived M must be in 1\.\.8"):
            derive_hnsw(big, bad, "l2")
