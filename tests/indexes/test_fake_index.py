"""FakeIndex returns exactly the recall fake_recall() promises, through the real evaluation loop."""

from __future__ import annotations

import itertools
import time
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from retrieval.errors import ConfigError
from retrieval.evaluation import Evaluator
from retrieval.groundtruth.exact import exact_knn
from retrieval.indexes import create_index, get_backend
from retrieval.loaders.synthetic import make_synthetic
from retrieval.stats.metrics import recall_by_id
from retrieval.testing.fake import (
    FakeIndex,
    fake_coins,
    fake_hits,
    fake_latency_us,
    fake_query_hits,
    fake_query_recall,
    fake_recall,
)

EFS = [1, 2, 3, 5, 8, 16, 17, 30, 48, 100, 400, 4096]


@pytest.fixture(scope="module")
def ds() -> Any:
    return make_synthetic(1500, 16, 60, seed=3)


def test_registered_on_import() -> None:
    assert get_backend("fake") is FakeIndex


@pytest.mark.parametrize(
    ("ef", "quality", "k", "half_ef", "hits"),
    [
        (16, 1.0, 10, 16, 5),  # 10 * 16/32 = 5 exactly
        (48, 1.0, 10, 16, 7),  # 7.5
        (4096, 1.0, 10, 16, 9),  # 9.96: quality 1 never reaches recall 1
        (4096, 1.1, 10, 16, 10),
        (1, 0.5, 10, 16, 0),
        (10, 2.0, 100, 10, 100),  # 2 * 10/20 = 1 exactly
        (30, 0.9, 100, 10, 67),  # 0.9 is not exact in binary: floor(67.49999...) = 67
    ],
)
def test_fake_hits_formula(ef: int, quality: float, k: int, half_ef: int, hits: int) -> None:
    assert fake_hits(ef, quality, k, half_ef) == hits
    assert fake_recall(ef, quality, k, half_ef) == hits / k
    exact = Fraction(k) * Fraction(quality) * Fraction(ef, ef + half_ef)
    assert hits == min(k, int(exact))


@pytest.mark.parametrize("quality", [0.3, 1.0, 1.5])
@pytest.mark.parametrize("k", [1, 10, 37])
def test_fake_recall_is_monotone(quality: float, k: int) -> None:
    values = [fake_recall(ef, quality, k) for ef in range(1, 4097)]
    assert all(b >= a for a, b in itertools.pairwise(values))
    assert values[-1] == (1.0 if quality > 1.01 else fake_recall(4096, quality, k))


@pytest.mark.parametrize(("metric", "quality", "k", "half_ef"),
                         [("l2", 1.0, 10, 16), ("ip", 0.8, 7, 4), ("cosine", 1.5, 25, 50)])
def test_measured_recall_equals_fake_recall(
    metric: str, quality: float, k: int, half_ef: int
) -> None:
    data = make_synthetic(1500, 16, 60, seed=3, metric=metric)  # type: ignore[arg-type]
    gt = exact_knn(data.base, data.queries, data.metric, k)
    index = create_index("fake", 16, data.metric,
                         {"quality": quality, "half_ef": half_ef, "us_per_ef": 0.0})
    index.build(data.base)
    for ef in EFS:
        index.set_search_params(ef_search=ef)
        res = index.search(data.queries, k)
        per_query = recall_by_id(res.ids, gt.ids, k)
        assert (per_query == fake_recall(ef, quality, k, half_ef)).all(), ef
        hits = fake_hits(ef, quality, k, half_ef)
        for row, true in zip(res.ids, gt.ids):  # misses are never true neighbours
            assert not np.isin(row[hits:], true).any()


def test_evaluator_single_and_batch_see_the_exact_curve(ds: Any) -> None:
    """The evaluation loop (one query per call, and batches) measures fake_recall exactly."""
    with Evaluator(ds, k=10, warmup=2, batch_repeats=1,
                   gt=exact_knn(ds.base, ds.queries, ds.metric, 10)) as ev:
        built = ev.build("fake", {"quality": 1.2, "us_per_ef": 0.0})
        for ef in (1, 10, 40, 200):
            for m in ev.measure(built, {"ef_search": ef}):
                # per query exactly; the mean up to float summation
                assert (m.per_query_recall == fake_recall(ef, 1.2, 10)).all(), (m.mode, ef)
                assert m.recall == pytest.approx(fake_recall(ef, 1.2, 10), abs=1e-12)


def test_latency_grows_with_ef(ds: Any) -> None:
    """Each call busy-waits at least nq * ef * us_per_ef microseconds, so a larger ef is slower
    by at least most of the difference (fastest of 3 calls per ef, against scheduler noise)."""
    index = create_index("fake", 16, "l2", {"us_per_ef": 20.0})
    index.build(ds.base)
    fastest: dict[int, float] = {}
    for ef in (10, 200):
        index.set_search_params(ef_search=ef)
        times = []
        for _ in range(3):
            t0 = time.perf_counter_ns()
            index.search(ds.queries[:5], 10)
            times.append((time.perf_counter_ns() - t0) / 1e3)
        fastest[ef] = min(times)
        assert fastest[ef] >= fake_latency_us(ef, 20.0, nq=5)
    assert fake_latency_us(200, 20.0, 5) == 20_000.0
    gap = fake_latency_us(200, 20.0, 5) - fake_latency_us(10, 20.0, 5)  # 19 ms
    assert fastest[200] - fastest[10] >= 0.5 * gap, fastest


def test_fewer_vectors_than_needed_pads(ds: Any) -> None:
    index = create_index("fake", 16, "l2", {"quality": 0.1, "us_per_ef": 0.0})
    index.build(ds.base[:12])
    index.set_search_params(ef_search=1)
    res = index.search(ds.queries[:4], 10)  # 0 hits, only 2 non-neighbours exist
    assert ((res.ids >= 0).sum(axis=1) == 2).all()
    assert np.isinf(res.distances[:, 2:]).all()


@pytest.mark.parametrize(
    ("build", "words"),
    [
        ({"quality": 0}, ("'quality'", "> 0")),
        ({"quality": 2.5}, ("'quality'", "<= 2")),
        ({"half_ef": 0}, ("'half_ef'", ">= 1")),
        ({"us_per_ef": -1}, ("'us_per_ef'", ">= 0")),
        ({"qualty": 1}, ("Did you mean 'quality'",)),
    ],
)
def test_fake_bad_build_params(build: dict[str, Any], words: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as info:
        create_index("fake", 16, "l2", build)
    for w in words:
        assert w in str(info.value)


def test_fake_bad_search_params() -> None:
    index = create_index("fake", 16, "l2")
    with pytest.raises(ConfigError, match="'ef_search' must be <= 4096; received 5000"):
        index.set_search_params(ef_search=5000)
    with pytest.raises(ConfigError, match=r"unknown knob 'ef'.*Did you mean 'ef_search'"):
        FakeIndex.knob_range("ef", FakeIndex.BuildParams(), 10)
    assert FakeIndex.knob_range("ef_search", FakeIndex.BuildParams(), 10) == (1, 4096)


@pytest.mark.parametrize(("metric", "ef", "spread"), [("l2", 16, 1), ("cosine", 40, 3),
                                                       ("ip", 4096, 2)])
def test_spread_gives_each_query_its_known_recall(metric: str, ef: int, spread: int) -> None:
    """With spread, each query keeps hits +- spread true neighbours (a seeded coin per query
    vector); single and batch modes see the same per-query values; misses are never true."""
    data = make_synthetic(1500, 16, 60, seed=3, metric=metric)  # type: ignore[arg-type]
    gt = exact_knn(data.base, data.queries, data.metric, 10)
    build = {"quality": 1.0, "half_ef": 16, "us_per_ef": 0.0, "spread": spread, "seed": 9}
    expect = fake_query_recall(data.queries, ef, 1.0, 10, 16, spread, 9)
    hits = fake_hits(ef, 1.0, 10, 16)
    assert set(np.round(expect * 10).astype(int)) == {hits - spread, min(10, hits + spread)}
    with Evaluator(data, k=10, warmup=0, batch_repeats=1, gt=gt) as ev:
        built = ev.build("fake", build)
        for m in ev.measure(built, {"ef_search": ef}):
            assert np.array_equal(m.per_query_recall, expect), m.mode
    index = create_index("fake", 16, data.metric, build)
    index.build(data.base)
    index.set_search_params(ef_search=ef)
    res = index.search(data.queries, 10)
    kept = fake_query_hits(data.queries, ef, 1.0, 10, 16, spread, 9)
    for row, true, h in zip(res.ids, gt.ids, kept):
        assert np.isin(row[:h], true).all() and not np.isin(row[h:], true).any()
        assert len(set(row.tolist())) == 10  # no vector twice


def test_coins_are_seeded_per_query_vector() -> None:
    q = make_synthetic(100, 8, 400, seed=1).queries
    coins = fake_coins(q, 0)
    assert set(coins.tolist()) == {-1, 1} and abs(coins.mean()) < 0.15  # about fair
    assert np.array_equal(coins[7:9], fake_coins(q[7:9], 0))  # depends on the row only
    assert not np.array_equal(coins, fake_coins(q, 1))  # and on the seed
    assert (fake_query_recall(q, 16, 1.0, 10, 16, 0, 5) == fake_recall(16, 1.0, 10)).all()
