"""The conformance suite catches broken adapters: each deliberately broken backend fails the
check that targets its defect (and a correct one passes it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

from retrieval.engines.faiss.hnsw import FaissHnswIndex
from retrieval.engines.hnswlib.index import HnswlibIndex
from retrieval.errors import ConfigError
from retrieval.indexes import registry
from retrieval.params import Params
from retrieval.testing.conformance import (
    CHECKS,
    CheckNotApplicable,
    Conformance,
    ConformanceCase,
    run_conformance,
    run_or_skip,
)

HNSW = {"M": 8, "ef_construction": 32}


class RawIpDistances(HnswlibIndex):
    """Returns hnswlib's own 'ip' distance (1 - ip) instead of rwb's -ip."""

    name = "broken-ip"

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        d, i = super()._search(x, k)
        return d + np.float32(1.0), i


class IgnoresEf(FaissHnswIndex):
    """Silently searches at the largest ef whatever is asked (a brute-force-like fallback)."""

    name = "broken-knob"

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        saved = self.search_params
        self.search_params = self.SearchParams(ef_search=4096)
        try:
            return super()._search(x, k)
        finally:
            self.search_params = saved


class NoCombinationCheck(HnswlibIndex):
    """Accepts ef_search < k (hnswlib would silently use k)."""

    name = "broken-combination"

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        return None


class DropsCustomIds(HnswlibIndex):
    name = "broken-ids"

    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> Any:
        return super().build(vectors, None)


class RandomSeed(HnswlibIndex):
    name = "broken-seed"
    _draws: ClassVar[int] = 0

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        RandomSeed._draws += 1
        self.seed = 1000 + RandomSeed._draws
        return super()._build(x)


class SearchesAfterClose(FaissHnswIndex):
    """close() forgets it was closed (the index keeps answering)."""

    name = "broken-close"

    def close(self) -> None:
        pass


class Unseeded(HnswlibIndex):
    """Declares an unseeded build and has no snapshot format: two checks do not apply."""

    name = "unseeded-nosnapshot"
    deterministic = False
    save_snapshot = None  # type: ignore[assignment]  # no longer SupportsSnapshot
    load_snapshot = None  # type: ignore[assignment]


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for cls in (RawIpDistances, IgnoresEf, NoCombinationCheck, DropsCustomIds, RandomSeed,
                SearchesAfterClose, Unseeded):
        monkeypatch.setitem(registry._REGISTRY, cls.name, cls)
    yield


@pytest.mark.parametrize(
    ("backend", "metric", "check", "words"),
    [
        ("broken-ip", "ip", "shapes_ids_distances", "not rwb 'ip' distances"),
        ("broken-knob", "l2", "monotone_knobs", "has no effect"),
        ("broken-combination", "l2", "invalid_combinations_rejected", "ef_search=9"),
        ("broken-ids", "l2", "custom_ids", "ids not given at build"),
        ("broken-seed", "l2", "deterministic_build", "same seed"),
        ("broken-close", "l2", "close_idempotent", "search after close"),
    ],
)
def test_suite_catches_defect(
    registered: None, backend: str, metric: Any, check: str, words: str
) -> None:
    suite = Conformance(ConformanceCase(backend, metric, HNSW))
    try:
        with pytest.raises(AssertionError, match=words):
            suite.run(check)
    finally:
        suite.close()


def test_correct_backend_passes_the_same_checks() -> None:
    report = run_conformance("hnswlib", metric="ip", build=HNSW, n=1500, n_queries=40)
    assert set(report.results) == set(CHECKS) and report.not_applicable == {}
    curve = report.results["monotone_knobs"]["curves"]["ef_search"]
    assert curve[0][1] < curve[-1][1] and curve[-1][1] >= 0.99


def test_unknown_check_name() -> None:
    suite = Conformance(ConformanceCase("hnswlib", build=HNSW))
    with pytest.raises(ConfigError, match="unknown check 'recal'"):
        suite.run("recal")


@pytest.mark.parametrize("check", ["deterministic_build", "snapshot_round_trip"])
def test_check_that_does_not_apply_is_a_skip_not_a_pass(registered: None, check: str) -> None:
    """A check that checks nothing (unseeded build, no snapshot format) raises
    CheckNotApplicable, and run_or_skip turns it into a pytest skip naming the reason (it once
    returned {"skipped": ...} and counted as a passed test)."""
    suite = Conformance(ConformanceCase("unseeded-nosnapshot", "l2", HNSW, n=600, n_queries=10))
    try:
        with pytest.raises(CheckNotApplicable):
            suite.run(check)
        with pytest.raises(pytest.skip.Exception, match="does not apply to unseeded"):
            run_or_skip(suite, check)
        assert check not in suite.results
    finally:
        suite.close()


def test_report_lists_checks_that_did_not_apply(registered: None) -> None:
    report = run_conformance("unseeded-nosnapshot", build=HNSW, n=600, n_queries=10)
    assert set(report.not_applicable) == {"deterministic_build", "snapshot_round_trip"}
    assert "deterministic = False" in report.not_applicable["deterministic_build"]
    assert set(report.results) == set(CHECKS) - set(report.not_applicable)
