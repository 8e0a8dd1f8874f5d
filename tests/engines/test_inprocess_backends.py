"""Backend-specific facts the conformance suite does not cover: export strings round-trip through
plain Faiss, hnswlib's memory figure is its file size, distance conventions, seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest

from retrieval.engines.faiss.hnsw import FaissHnswIndex
from retrieval.engines.faiss.ivf import FaissIvfIndex, IvfBuild, IvfSearch
from retrieval.engines.hnswlib.index import HnswlibIndex
from retrieval.indexes import create_index, get_backend
from retrieval.loaders.synthetic import make_synthetic
from retrieval.testing.conformance import exact_neighbours, true_distances

FAISS_DEFAULT_KMEANS_SEED = 1234  # faiss ClusteringParameters.seed default
FAISS_DEFAULT_HNSW_SEED = 12345  # faiss HNSW level generator default
PARAMETER_SPACE: Any = faiss.ParameterSpace()


@pytest.fixture(scope="module")
def ds() -> Any:
    return make_synthetic(2000, 32, 40, seed=1)


@pytest.mark.parametrize(
    ("build", "search", "factory", "space"),
    [
        ({"nlist": 16}, {"nprobe": 3}, "IVF16,Flat", "nprobe=3"),
        ({"nlist": 16, "encoding": "sq8"}, {"nprobe": 5}, "IVF16,SQ8", "nprobe=5"),
        ({"nlist": 16, "encoding": "pq", "pq_m": 8, "pq_nbits": 4, "refine": True},
         {"nprobe": 2, "k_factor": 4}, "IVF16,PQ8x4np,RFlat", "nprobe=2,k_factor_rf=4"),
        ({"nlist": 8, "encoding": "sq8", "refine": True}, {"nprobe": 8, "k_factor": 1},
         "IVF8,SQ8,RFlat", "nprobe=8,k_factor_rf=1"),
    ],
)
@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_ivf_export_strings_rebuild_the_same_index(
    ds: Any, metric: str, build: dict[str, Any], search: dict[str, Any], factory: str, space: str
) -> None:
    """factory_string + parameter_space_string, applied with plain Faiss, answer exactly as we do
    (same k-means seed, all vectors used for training)."""
    b, s = IvfBuild(**build), IvfSearch(**search)
    assert FaissIvfIndex.factory_string(b) == factory
    assert FaissIvfIndex.parameter_space_string(s, b) == space
    data = make_synthetic(2000, 32, 40, seed=1, metric=metric)  # type: ignore[arg-type]
    ours = create_index("faiss-ivf", 32, data.metric, b, seed=FAISS_DEFAULT_KMEANS_SEED)
    ours.build(data.base)
    ours.set_search_params(**search)
    mine = ours.search(data.queries, 10)

    faiss.omp_set_num_threads(1)
    native: Any = faiss.index_factory(32, factory, faiss.METRIC_L2 if metric == "l2"
                                 else faiss.METRIC_INNER_PRODUCT)
    native.train(data.base)
    native.add(data.base)
    PARAMETER_SPACE.set_index_parameters(native, space)
    d, i = native.search(data.queries, 10)
    np.testing.assert_array_equal(mine.ids, i)
    np.testing.assert_allclose(mine.distances, d if metric == "l2" else -d, rtol=1e-6)


def test_hnsw_export_strings_rebuild_the_same_index(ds: Any) -> None:
    build = {"M": 12, "ef_construction": 40}
    ours = create_index("faiss-hnsw", 32, "l2", build, seed=FAISS_DEFAULT_HNSW_SEED)
    ours.build(ds.base)
    ours.set_search_params(ef_search=20)
    assert FaissHnswIndex.factory_string(ours.build_params) == "HNSW12"
    assert FaissHnswIndex.parameter_space_string(ours.search_params) == "efSearch=20"
    mine = ours.search(ds.queries, 10)

    faiss.omp_set_num_threads(1)
    native: Any = faiss.index_factory(32, "HNSW12", faiss.METRIC_L2)
    native.hnsw.efConstruction = 40
    native.add(ds.base)
    PARAMETER_SPACE.set_index_parameters(native, "efSearch=20")
    _d, i = native.search(ds.queries, 10)
    np.testing.assert_array_equal(mine.ids, i)


def test_hnswlib_memory_is_the_saved_file_size(ds: Any, tmp_path: Path) -> None:
    index = create_index("hnswlib", 32, "l2", {"M": 8, "ef_construction": 40})
    info = index.build(ds.base)
    assert isinstance(index, HnswlibIndex)
    path = tmp_path / "h.bin"
    index._index.save_index(str(path))
    assert info.memory_bytes == index.memory_bytes() == path.stat().st_size


@pytest.mark.parametrize("name", ["hnswlib", "faiss-hnsw", "faiss-ivf"])
@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_distances_follow_rwb_convention(name: str, metric: str) -> None:
    data = make_synthetic(1000, 16, 20, seed=2, metric=metric)  # type: ignore[arg-type]
    build = {"nlist": 8} if name == "faiss-ivf" else {"M": 8, "ef_construction": 40}
    index = create_index(name, 16, data.metric, build)
    index.build(data.base)
    index.set_search_params(**get_backend(name).most_accurate_search(index.build_params))
    res = index.search(data.queries, 5)
    np.testing.assert_allclose(res.distances, true_distances(data, res.ids, data.queries),
                               rtol=1e-4, atol=1e-4)
    exact_ids, _exact_d = exact_neighbours(data, 5)
    np.testing.assert_array_equal(res.ids, exact_ids)
    if metric == "cosine":
        assert (res.distances >= -1e-6).all() and (res.distances <= 2 + 1e-6).all()


@pytest.mark.parametrize("name", ["hnswlib", "faiss-hnsw", "faiss-ivf"])
def test_seed_changes_the_build(name: str, ds: Any) -> None:
    """The seed reaches the library (different seeds, different answers at low effort)."""
    build = {"nlist": 32} if name == "faiss-ivf" else {"M": 4, "ef_construction": 8}
    low = {"nprobe": 1} if name == "faiss-ivf" else {"ef_search": 10}
    out = []
    for seed in (0, 1):
        index = create_index(name, 32, "l2", build, seed=seed)
        index.build(ds.base)
        index.set_search_params(**low)
        out.append(index.search(ds.queries, 10).ids)
    assert not np.array_equal(out[0], out[1])


def test_ivf_train_size_is_used(ds: Any) -> None:
    index = create_index("faiss-ivf", 32, "l2", {"nlist": 8, "train_size": 500})
    assert index.build(ds.base).extra["train_size"] == 500
    default = create_index("faiss-ivf", 32, "l2", {"nlist": 4})
    assert default.build(ds.base).extra["train_size"] == 1024  # min(n, 256 * nlist)


def test_hnswlib_pads_when_fewer_than_k_exist(ds: Any) -> None:
    index = create_index("hnswlib", 32, "ip", {"M": 4, "ef_construction": 8})
    index.build(ds.base[:50])
    index.set_search_params(ef_search=100)
    res = index.search(ds.queries[:3], 60)
    assert (res.ids[:, 50:] == -1).all() and np.isinf(res.distances[:, 50:]).all()
    assert ((res.ids[:, :50] >= 0).sum(axis=1) >= 45).all()
