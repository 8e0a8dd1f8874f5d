"""Incremental ground truth over a live set equals an independent numpy brute force at every
step of random insert / delete / replace sequences (ties broken by the smaller id)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.errors import ConfigError, DataError
from retrieval.groundtruth.live import LiveGroundTruth, brute_force_live


def _numpy_truth(q: np.ndarray, x: np.ndarray, ids: np.ndarray, metric: str, k: int
                 ) -> np.ndarray:
    """Independent reference: explicit differences / dot products, float64, (distance, id)."""
    q, x = q.astype(np.float64), x.astype(np.float64)
    if metric == "cosine":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    out = np.full((len(q), k), -1, dtype=np.int64)
    for r, qr in enumerate(q):
        if metric == "l2":
            d = ((x - qr) ** 2).sum(axis=1)
        else:
            d = -(x @ qr) if metric == "ip" else 1.0 - x @ qr
        order = sorted(range(len(ids)), key=lambda j: (d[j], ids[j]))[:k]
        out[r, :len(order)] = ids[order]
    return out


def _run(metric: str, data: np.ndarray, queries: np.ndarray, k: int, margin: int,
         seed: int) -> LiveGroundTruth:
    rng = np.random.default_rng(seed)
    n = data.shape[0]
    ids_of_row = 1000 + 7 * rng.permutation(n).astype(np.int64)  # never row numbers
    gt = LiveGroundTruth(queries, metric, k, margin=margin)
    live: set[int] = set()
    nxt = 0
    for _ in range(25):
        op = rng.choice(["insert", "delete", "replace"], p=[0.4, 0.3, 0.3])
        if op in ("delete", "replace") and live:
            gone = rng.choice(sorted(live), size=max(1, int(rng.integers(1, len(live) // 3 + 2))),
                              replace=False)
            gt.delete(ids_of_row[gone])
            live -= set(gone.tolist())
        if op in ("insert", "replace") and nxt < n:
            m = int(rng.integers(1, 40))
            rows = np.arange(nxt, min(n, nxt + m))
            nxt += len(rows)
            gt.insert(data[rows], ids_of_row[rows])
            live |= set(rows.tolist())
        rows = np.array(sorted(live), dtype=np.int64)
        want = _numpy_truth(queries, data[rows], ids_of_row[rows], metric, k)
        got = gt.top()
        np.testing.assert_array_equal(got.ids, want, err_msg=f"after {op}")
        assert gt.live_count == len(live)
        assert np.array_equal(
            brute_force_live(queries, data[rows], ids_of_row[rows], metric, k).ids, want)
    return gt


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_equals_brute_force_at_every_step(metric: str) -> None:
    rng = np.random.default_rng(1)
    data = rng.standard_normal((400, 8)).astype(np.float32)
    queries = rng.standard_normal((30, 8)).astype(np.float32)
    gt = _run(metric, data, queries, k=5, margin=3, seed=2)
    assert gt.stats.recomputed > 0  # lists did run dry: the recompute path was exercised


def test_ties_by_smaller_id_with_duplicates() -> None:
    """Integer vectors with many exact duplicates: equal distances everywhere."""
    rng = np.random.default_rng(3)
    data = rng.integers(-2, 3, size=(300, 3)).astype(np.float32)
    queries = rng.integers(-2, 3, size=(20, 3)).astype(np.float32)
    _run("l2", data, queries, k=6, margin=2, seed=4)


def test_margin_zero_and_small_live_set() -> None:
    rng = np.random.default_rng(5)
    data = rng.standard_normal((60, 4)).astype(np.float32)
    _run("l2", data, rng.standard_normal((10, 4)).astype(np.float32), k=4, margin=0, seed=6)


def test_bad_writes_refused() -> None:
    gt = LiveGroundTruth(np.zeros((2, 3), np.float32), "l2", 2)
    gt.insert(np.ones((2, 3), np.float32), np.array([5, 6]))
    with pytest.raises(DataError, match="id 5 is already live"):
        gt.insert(np.ones((1, 3), np.float32), np.array([5]))
    with pytest.raises(DataError, match="id 9 is not live"):
        gt.delete(np.array([9]))
    with pytest.raises(ConfigError, match="'k'"):
        LiveGroundTruth(np.zeros((2, 3), np.float32), "l2", 0)
    assert gt.top().ids.tolist() == [[5, 6], [5, 6]]
