"""tune.build_search: derived over IVF ``nlist``: a smaller-nlist Faiss IVF derived from one
larger k-means by merging its centroids (weighted by list size) and reassigning the vectors."""

from __future__ import annotations

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from retrieval.engines.faiss.derive_ivf import list_sizes, merge_centroids  # noqa: E402
from retrieval.engines.faiss.ivf import FaissIvfIndex  # noqa: E402
from retrieval.errors import ConfigError  # noqa: E402
from retrieval.indexes.base import SupportsDerivedBuild  # noqa: E402


def _data(n: int = 6000, d: int = 24, nq: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    centers = rng.normal(size=(30, d)).astype(np.float32) * 3
    x = (centers[rng.integers(0, 30, n)] + rng.normal(size=(n, d))).astype(np.float32)
    q = (centers[rng.integers(0, 30, nq)] + rng.normal(size=(nq, d))).astype(np.float32)
    return x, q


def _index(x: np.ndarray, nlist: int, **build: object) -> FaissIvfIndex:
    params = FaissIvfIndex.BuildParams.model_validate({"nlist": nlist, **build})
    index = FaissIvfIndex(x.shape[1], "l2", params, seed=0, threads=1)
    index.set_build_threads(1)
    return index


def _recall(index: FaissIvfIndex, q: np.ndarray, truth: np.ndarray, nprobe: int) -> float:
    index.set_search_params(nprobe=nprobe)
    ids = index.search(q, 10).ids
    return float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, truth, strict=True)]))


def test_ivf_is_a_derived_build_over_nlist() -> None:
    assert issubclass(FaissIvfIndex, SupportsDerivedBuild)
    assert FaissIvfIndex.derived_param() == "nlist"


def test_merged_centroids_weighted_by_list_size() -> None:
    # two heavy lists at 0 and one light list far away: 2 merged centroids keep the far one
    c = np.array([[0.0, 0.0], [0.2, 0.0], [10.0, 10.0]], dtype=np.float32)
    merged = merge_centroids(c, np.array([100, 300, 5]), 2, "l2", seed=0)
    merged = merged[np.argsort(merged[:, 0])]
    assert np.allclose(merged[1], [10.0, 10.0], atol=1e-4)
    # the weighted mean of the two near lists (100 at 0.0, 300 at 0.2): 0.15, not 0.1
    assert merged[0, 0] == pytest.approx(0.15, abs=1e-4)
    with pytest.raises(ValueError, match=r"derived nlist must be in 1\.\.3"):
        merge_centroids(c, np.ones(3), 4, "l2", seed=0)


def test_derived_ivf_holds_every_id_and_recall_close_to_a_real_build() -> None:
    x, q = _data()
    truth = faiss.knn(q, x, 10)[1]
    big = _index(x, 128)
    big.build(x)
    derived = _index(x, 32)
    info = derived.derive_from(big, x)
    assert info.extra["derived_from"] == {"nlist": 128} and info.build_s >= 0
    assert int(list_sizes(derived._ivf).sum()) == x.shape[0]  # every vector, in 32 lists
    assert int(derived._ivf.nlist) == 32
    real = _index(x, 32)
    real.build(x)
    ids = derived.search(q, 10).ids
    assert ids.min() >= 0 and ids.max() < x.shape[0]
    for nprobe in (1, 2, 4):
        # the shortcut's error on this data: within 0.08 recall points of a real nlist=32
        assert abs(_recall(derived, q, truth, nprobe) - _recall(real, q, truth, nprobe)) <= 0.08
    assert _recall(derived, q, truth, 32) == pytest.approx(1.0)  # every list: exact


def test_derive_refuses_a_smaller_or_different_source() -> None:
    x, _ = _data(n=1000)
    src = _index(x, 16)
    src.build(x)
    with pytest.raises(ConfigError, match="nlist >= 32"):
        _index(x, 32).derive_from(src, x)
    with pytest.raises(ConfigError, match="same other build params"):
        _index(x, 8, encoding="sq8").derive_from(src, x)
    with pytest.raises(ConfigError, match="base vectors"):
        _index(x, 8).derive_from(src, None)
