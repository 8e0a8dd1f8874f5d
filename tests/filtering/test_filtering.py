"""Filtered search: exact filtered ground truth, the fewer-than-k rule, workloads, bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError, DataError
from retrieval.evaluation import Evaluator
from retrieval.filtering import Attributes, FilterSpec, Where, bind
from retrieval.loaders.synthetic import make_synthetic
from retrieval.testing import fake  # noqa: F401  (registers the "fake" backend)
from retrieval.tune.filterbench import FilteredBench
from retrieval.tune.spec import parse_spec
from retrieval.workload import Bucket, bind_workload, filtered_ground_truth, filtered_recall


def _line() -> VectorDataset:
    """Ten points on a line (x = row), one query at x = 0.1; v = row, color alternates."""
    base = np.stack([np.arange(10, dtype=np.float32), np.zeros(10, np.float32)], axis=1)
    attrs = Attributes.from_columns({"v": np.arange(10),
                                     "color": ["red", "blue"] * 5,
                                     "tags": [["a", "b"] if i < 3 else ["c"] for i in range(10)]})
    return VectorDataset("line", base, np.array([[0.1, 0.0]], np.float32), "l2", attributes=attrs)


def _bucket(ds: VectorDataset, where: Where) -> Bucket:
    assert ds.attributes is not None
    return Bucket("b", None, (bind(where, ds.attributes, label="t"),), np.zeros(1, np.int64))


def test_exact_filtered_ground_truth_on_a_tiny_dataset() -> None:
    ds = _line()
    gt = filtered_ground_truth(ds.base, ds.queries, "l2", _bucket(ds, Where(attr="color",
                                                                          eq="blue")), 3)
    assert gt.ids.tolist() == [[1, 3, 5]]
    assert np.allclose(gt.distances, [[0.81, 2.9 ** 2, 4.9 ** 2]], atol=1e-4)
    gt = filtered_ground_truth(ds.base, ds.queries, "l2", _bucket(ds, Where.model_validate(
        {"attr": "tags", "in": ["b", "zz"]})), 2)
    assert gt.ids.tolist() == [[0, 1]]


def test_fewer_than_k_rule() -> None:
    ds = _line()
    gt = filtered_ground_truth(ds.base, ds.queries, "l2", _bucket(ds, Where(attr="v",
                                                                          range=(8, 9))), 5)
    assert gt.ids.tolist() == [[8, 9, -1, -1, -1]] and gt.n_valid.tolist() == [2]
    assert np.isinf(gt.distances[0, 2:]).all()
    # recall over the 2 available matches
    assert filtered_recall(np.array([[8, 9, -1, -1, -1]]), gt, 5).tolist() == [1.0]
    assert filtered_recall(np.array([[9, 0, 1, -1, -1]]), gt, 5).tolist() == [0.5]
    # k matches exist: missing ids are misses; ids outside the filter never hit
    gt3 = filtered_ground_truth(ds.base, ds.queries, "l2", _bucket(ds, Where(attr="color",
                                                                           eq="blue")), 3)
    assert filtered_recall(np.array([[1, -1, -1]]), gt3, 3).tolist() == pytest.approx([1 / 3])
    assert filtered_recall(np.array([[0, 2, 1]]), gt3, 3).tolist() == pytest.approx([1 / 3])


def test_fake_index_post_and_pre_filter_against_the_exact_answer() -> None:
    ds = make_synthetic(1500, 8, 40, n_clusters=8, attributes=True, seed=3)
    fs = FilterSpec(selectivities=[0.02, 0.3], attribute="uniform",
                    strategies=["prefilter", "postfilter"])
    with Evaluator(ds, 10, warmup=2, batch_repeats=1) as ev:
        buckets = bind_workload(fs, ds.attributes, ds.n_queries, seed=0)
        bench = FilteredBench(ev, buckets)
        built = ev.build("fake", {"quality": 1.0})
        for b in buckets:
            pre = bench.measure(built, {"ef_search": 64}, "prefilter", b, label="fake")
            assert pre.per_query_recall.min() == 1.0
            low = bench.measure(built, {"ef_search": 64}, "postfilter", b, label="fake",
                                overfetch=1)
            high = bench.measure(built, {"ef_search": 64}, "postfilter", b, label="fake",
                                 overfetch=200)
            assert low.per_query_recall.mean() < high.per_query_recall.mean()
            assert high.per_query_recall.mean() > 0.95
        with pytest.raises(ConfigError, match="no in-engine filtering"):
            bench.measure(built, {"ef_search": 64}, "engine", buckets[0], label="fake")


def test_workload_selectivity_is_measured_and_near_the_target() -> None:
    ds = make_synthetic(4000, 8, 30, n_clusters=8, attributes=True)
    fs = FilterSpec(selectivities=[0.01, 0.5], attribute="clustered")
    for b in bind_workload(fs, ds.attributes, ds.n_queries, seed=1):
        assert b.target is not None
        assert abs(b.selectivity - b.target) < 0.2 * b.target
        assert b.per_query_selectivity.shape == (30,)
    labels = bind_workload(FilterSpec(selectivities=[0.05], attribute="tag"), ds.attributes, 30)
    assert 0.0 < labels[0].selectivity < 0.2


def test_synthetic_attributes_keep_the_vectors() -> None:
    a = make_synthetic(500, 8, 10, seed=4)
    b = make_synthetic(500, 8, 10, seed=4, attributes=True, correlation=0.0)
    assert np.array_equal(a.base, b.base) and a.fingerprint == b.fingerprint
    assert b.attributes is not None and b.attributes.names == ["cluster", "clustered", "tag",
                                                               "uniform"]


# --- bad input ----------------------------------------------------------------------------
def test_unknown_attribute_type_mismatch_and_empty_filter() -> None:
    ds = _line()
    assert ds.attributes is not None
    with pytest.raises(ConfigError, match=r"unknown attribute 'colour'.*allowed: color, tags, v"):
        bind(Where(attr="colour", eq="red"), ds.attributes, label="f")
    with pytest.raises(ConfigError, match=r"field 'color.range' must be eq or in .*labels"):
        bind(Where(attr="color", range=(0, 3)), ds.attributes, label="f")
    with pytest.raises(ConfigError, match=r"field 'v' must be integers .*received 'x'"):
        bind(Where(attr="v", eq="x"), ds.attributes, label="f")
    with pytest.raises(ConfigError, match=r"matches no base vector \(0 of 10\)"):
        bind(Where(attr="v", range=(50, 60)), ds.attributes, label="f")


def test_attributes_of_the_wrong_length() -> None:
    ds = _line()
    short = Attributes.from_columns({"v": np.arange(9)})
    with pytest.raises(DataError, match=r"attributes have 9 rows for 10 base vectors"):
        dataclasses.replace(ds, attributes=short)
    with pytest.raises(DataError, match=r"attribute 'w': 3 values for 4 vectors"):
        Attributes(4, {"w": np.arange(3)})
    with pytest.raises(DataError, match=r"column 'f' must hold integers or labels"):
        Attributes.from_columns({"f": np.ones(3)})


@pytest.mark.parametrize(("filters", "message"), [
    ({"selectivities": [0.0, 0.1], "attribute": "u"}, r"selectivity must be in \(0, 1\)"),
    ({"selectivities": [0.1]}, r"needs 'attribute'"),
    ({"fixed": [{"name": "x", "where": {"attr": "a", "eq": 1, "range": [1, 2]}}]},
     r"exactly one of eq, in, range"),
    ({"fixed": [{"name": "x", "where": {"attr": "a", "range": [3, 2]}}]}, r"lo <= hi"),
    ({"fixed": []}, r"give 'fixed' filters and/or 'selectivities'"),
    ({"selectivities": [0.1], "attribute": "u", "strategies": ["brute"]}, r"strategies"),
])
def test_filter_spec_errors(filters: dict[str, object], message: str) -> None:
    data = {"dataset": "synthetic-20k", "indexes": [{"backend": "faiss-flat"}],
            "filters": filters}
    with pytest.raises(ConfigError, match=message):
        parse_spec(data, source="s.yaml")


def test_unfiltered_spec_dumps_as_before() -> None:
    spec = parse_spec({"dataset": "synthetic-20k", "indexes": [{"backend": "faiss-flat"}]})
    assert "filters" not in spec.model_dump(mode="json")


def test_no_attributes_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="the dataset has no attributes"):
        bind_workload(FilterSpec(selectivities=[0.1], attribute="u"), None, 3)


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_ground_truth_paths_agree(metric: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over-fetch + dense (many per-query filters) and per-filter gathering give the same
    exact answer, including queries whose far-away filter defeats the over-fetch."""
    from retrieval.workload import truth as G

    ds = make_synthetic(3000, 8, 40, n_clusters=8, attributes=True, metric=metric)  # type: ignore[arg-type]
    for s in (0.3, 0.9):
        (b,) = bind_workload(FilterSpec(selectivities=[s], attribute="clustered"),
                             ds.attributes, ds.n_queries, seed=2)
        assert len(b.filters) > G.DENSE_MIN_FILTERS
        fast = G.filtered_ground_truth(ds.base, ds.queries, metric, b, 10)
        monkeypatch.setattr(G, "DENSE_MIN_FILTERS", 10**9)
        plain = G.filtered_ground_truth(ds.base, ds.queries, metric, b, 10)
        monkeypatch.undo()
        assert np.array_equal(fast.ids, plain.ids)
        assert np.allclose(fast.distances, plain.distances, atol=1e-3)


def _two_filter_dataset() -> tuple[VectorDataset, Bucket, Bucket]:
    """Ten points on a line, two queries (x = 0.1 and x = 8.9), filters 'red' and 'blue'; two
    buckets with the same two filters but each query mapped to the other one."""
    base = np.stack([np.arange(10, dtype=np.float32), np.zeros(10, np.float32)], axis=1)
    attrs = Attributes.from_columns({"color": ["red", "blue"] * 5})
    queries = np.array([[0.1, 0.0], [8.9, 0.0]], np.float32)
    ds = VectorDataset("line2", base, queries, "l2", attributes=attrs)
    red = bind(Where(attr="color", eq="red"), attrs, label="t")
    blue = bind(Where(attr="color", eq="blue"), attrs, label="t")
    one = Bucket("b", None, (red, blue), np.array([0, 1], np.int64))
    other = Bucket("b", None, (red, blue), np.array([1, 0], np.int64))
    return ds, one, other


def test_filtered_ground_truth_cache_is_keyed_by_k(tmp_path) -> None:
    """A cached top-3 is never served for k = 5 (nor the other way round): ``k`` is in the key."""
    ds, bucket, _ = _two_filter_dataset()
    kw = {"fingerprint": "fp", "cache": tmp_path}
    k3 = filtered_ground_truth(ds.base, ds.queries, "l2", bucket, 3, **kw)
    k5 = filtered_ground_truth(ds.base, ds.queries, "l2", bucket, 5, **kw)
    assert k3.ids.shape == (2, 3) and k5.ids.shape == (2, 5)
    assert k5.ids.tolist() == [[0, 2, 4, 6, 8], [9, 7, 5, 3, 1]]
    assert len(list(tmp_path.iterdir())) == 2
    again = filtered_ground_truth(ds.base, ds.queries, "l2", bucket, 3, **kw)  # a cache hit
    assert again.ids.tolist() == k3.ids.tolist() == [[0, 2, 4], [9, 7, 5]]


def test_filtered_ground_truth_cache_is_keyed_by_the_per_query_filter_map(tmp_path) -> None:
    """Two buckets with the same filters but another query -> filter map have other exact
    answers: the cache must not serve one for the other (``of_query`` is in the key)."""
    ds, one, other = _two_filter_dataset()
    kw = {"fingerprint": "fp", "cache": tmp_path}
    a = filtered_ground_truth(ds.base, ds.queries, "l2", one, 2, **kw)
    b = filtered_ground_truth(ds.base, ds.queries, "l2", other, 2, **kw)
    assert a.ids.tolist() == [[0, 2], [9, 7]]  # query 0 -> red, query 1 -> blue
    assert b.ids.tolist() == [[1, 3], [8, 6]]  # query 0 -> blue, query 1 -> red
    assert one.digest != other.digest
