import numpy as np
import pytest

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError, DataError
from retrieval.groundtruth.exact import exact_distances, exact_knn, ground_truth
from retrieval.stats.metrics import latency_summary, recall_by_id, recall_summary, recall_tie_aware


def test_recall_by_id_counts_intersection_and_ignores_minus_one():
    exact = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    found = np.array([[4, 3, 9, -1], [-1, -1, -1, -1]])
    assert recall_by_id(found, exact, 4).tolist() == [0.5, 0.0]
    assert recall_by_id(np.array([[2, 1, 0, 0]]), exact[:1], 2).tolist() == [1.0]


def test_tie_aware_recall_counts_boundary_ties():
    exact_d = np.array([[0.1, 0.2, 0.3]], dtype=np.float32)
    # retrieved a different id at exactly the k-th distance: by-id misses, tie-aware counts
    found_d = np.array([[0.1, 0.2, 0.3]], dtype=np.float32)
    assert recall_tie_aware(found_d, exact_d, 3).tolist() == [1.0]
    found_d = np.array([[0.1, 0.2, 0.5]], dtype=np.float32)
    assert recall_tie_aware(found_d, exact_d, 3).tolist() == pytest.approx([2 / 3])
    found_d = np.array([[0.1, np.inf, np.inf]], dtype=np.float32)
    assert recall_tie_aware(found_d, exact_d, 3).tolist() == pytest.approx([1 / 3])


def test_latency_and_recall_summaries():
    lat = np.arange(1, 101, dtype=float)
    s = latency_summary(lat)
    assert s["p50_ms"] == pytest.approx(50.5)
    assert s["max_ms"] == 100
    assert s["p99_ms"] == pytest.approx(99.01)
    r = recall_summary(np.array([1.0, 0.9, 0.5, 1.0]), target=0.95)
    assert r["share_below_target"] == 0.5
    assert r["recall_min"] == 0.5


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_exact_knn_matches_numpy(metric):
    rng = np.random.default_rng(0)
    base = rng.standard_normal((200, 8)).astype(np.float32)
    q = rng.standard_normal((5, 8)).astype(np.float32)
    gt = exact_knn(base, q, metric, 10)
    if metric == "l2":
        d = ((q[:, None, :] - base[None]) ** 2).sum(-1)
    elif metric == "ip":
        d = -(q @ base.T)
    else:
        qn = q / np.linalg.norm(q, axis=1, keepdims=True)
        bn = base / np.linalg.norm(base, axis=1, keepdims=True)
        d = 1 - qn @ bn.T
    assert np.array_equal(gt.ids, np.argsort(d, axis=1)[:, :10])
    assert np.allclose(gt.distances, np.sort(d, axis=1)[:, :10], atol=1e-4)
    assert np.all(np.diff(gt.distances, axis=1) >= -1e-6)
    ds = VectorDataset("t", base, q, metric)
    assert np.allclose(exact_distances(ds, gt.ids), gt.distances, atol=1e-4)


def test_ground_truth_is_cached_on_disk(tmp_path):
    rng = np.random.default_rng(1)
    ds = VectorDataset("t", rng.standard_normal((300, 4)), rng.standard_normal((7, 4)), "l2")
    gt1 = ground_truth(ds, 10, cache=tmp_path)
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1 and ds.fingerprint in files[0].name
    gt2 = ground_truth(ds, 5, cache=tmp_path)
    assert np.array_equal(gt1.ids[:, :5], gt2.ids[:, :5])
    assert len(list(tmp_path.glob("*.npz"))) == 1  # k <= 100 reuses the one file


def test_ground_truth_rejects_k_above_n():
    ds = VectorDataset("t", np.ones((3, 2)), np.ones((1, 2)), "l2")
    with pytest.raises(ConfigError, match="number of base vectors \\(3\\); received 5"):
        ground_truth(ds, 5, use_cache=False)


@pytest.mark.parametrize(
    ("base", "queries", "match"),
    [
        (np.ones((4, 3)), np.ones((2, 5)), "query dimension 5 does not match base dimension 3"),
        (np.zeros((0, 3)), np.ones((2, 3)), "is empty"),
        (np.ones((4, 3)), np.zeros((0, 3)), "is empty"),
        (np.array([[1.0, np.nan], [0, 1]]), np.ones((1, 2)), "NaN or inf"),
        (np.ones((4, 3)), np.array([[np.inf, 0, 0]]), "NaN or inf"),
    ],
)
def test_dataset_rejects_bad_vectors(base, queries, match):
    with pytest.raises(DataError, match=match):
        VectorDataset("bad", base, queries, "l2")


def test_dataset_rejects_unknown_metric():
    with pytest.raises(ConfigError, match=r"metric.*one of l2, ip, cosine; received 'euclid'"):
        VectorDataset("bad", np.ones((2, 2)), np.ones((1, 2)), "euclid")  # type: ignore[arg-type]
