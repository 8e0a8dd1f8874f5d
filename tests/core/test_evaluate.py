import numpy as np
import pytest

from retrieval.errors import ConfigError
from retrieval.evaluation import Evaluator
from retrieval.loaders.synthetic import make_synthetic


@pytest.fixture(scope="module")
def small():
    return make_synthetic(2000, 16, 50, seed=3)


def test_flat_is_exact_in_both_modes(small, tmp_path):
    with Evaluator(small, 10, workdir=tmp_path, warmup=4, batch_repeats=2) as ev:
        built = ev.build("faiss-flat", {})
        single, batch = ev.measure(built, {})
    for m in (single, batch):
        assert m.recall == 1.0 and m.per_query_recall_tie.min() == 1.0
        assert m.n_queries == 50 and m.k == 10
        assert m.memory_bytes and m.memory_bytes >= 2000 * 16 * 4
    assert single.mode == "single" and single.latency_ms.shape == (50,)
    assert batch.mode == "batch" and batch.latency_ms.shape == (2,)
    # QPS from the timings: single = 1000 / mean ms per query, batch = queries / best pass
    assert single.qps == pytest.approx(1000.0 / single.latency_ms.mean(), rel=1e-9)
    assert batch.qps == pytest.approx(50 / (batch.latency_ms.min() / 1000.0), rel=1e-9)
    s = single.summary(target=0.9)
    assert s["p50_ms"] <= s["p95_ms"] <= s["p99_ms"] <= s["max_ms"]
    assert s["share_below_target"] == 0.0


def test_build_is_reused_for_same_params(small):
    with Evaluator(small, 5) as ev:
        assert ev.build("faiss-flat", {}) is ev.build("faiss-flat", {})


def test_query_subset_and_empty_subset(small):
    with Evaluator(small, 5, warmup=0) as ev:
        built = ev.build("faiss-flat", {})
        (m,) = ev.measure(built, {}, modes=["batch"], query_idx=np.arange(10), query_set="tune")
        assert m.n_queries == 10 and m.query_set == "tune"
        with pytest.raises(ConfigError, match="empty"):
            ev.measure(built, {}, query_idx=np.array([], dtype=int))


def test_k_larger_than_base_is_rejected():
    ds = make_synthetic(20, 4, 3)
    with pytest.raises(ConfigError, match="number of base vectors \\(20\\); received 50"):
        Evaluator(ds, 50)


def test_unknown_backend_and_param_suggest_closest(small):
    with Evaluator(small, 5) as ev:
        with pytest.raises(
            ConfigError, match=r"unknown backend 'faiss-flt'.*Did you mean 'faiss-flat'"
        ):
            ev.build("faiss-flt", {})
        with pytest.raises(ConfigError, match="unknown"):
            ev.build("faiss-flat", {"nlist": 3})


def test_recorded_build_params_validate_again(small):
    """What a run records for a build (build_dict) must be accepted again (export, verify)."""
    from retrieval.indexes import get_backend

    with Evaluator(small, 5, warmup=0) as ev:
        built = ev.build("faiss-ivf", {"nlist": 16})
        cls = get_backend("faiss-ivf")
        assert cls.BuildParams.model_validate(built.build_dict) == built.build


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
@pytest.mark.parametrize(("backend", "build", "search"), [
    ("hnswlib", {"M": 8, "ef_construction": 40}, {"ef_search": 20}),
    ("faiss-hnsw", {"M": 8, "ef_construction": 40}, {"ef_search": 20}),
    ("faiss-ivf", {"nlist": 16}, {"nprobe": 2}),
    ("faiss-ivf", {"nlist": 16, "encoding": "sq8", "refine": True}, {"nprobe": 2, "k_factor": 2}),
])
def test_timed_hot_path_answers_exactly_like_search(small, metric, backend, build, search):
    """The evaluation loop times `hot_search` calls; their answers must be search()'s."""
    from retrieval.indexes import create_index
    from retrieval.indexes.base import SupportsHotSearch

    index = create_index(backend, small.dim, metric, build)
    ids = np.arange(small.n_base, dtype=np.int64) * 7 + 3  # custom ids are mapped too
    index.build(small.base, ids)
    index.set_search_params(**search)
    assert isinstance(index, SupportsHotSearch)
    call, finish = index.hot_search(10)
    for row in range(5):
        q = small.queries[row : row + 1]
        hot, ref = finish(call(q)), index.search(q, 10)
        np.testing.assert_array_equal(hot.ids, ref.ids)
        np.testing.assert_allclose(hot.distances, ref.distances, rtol=1e-6)
    index.close()
