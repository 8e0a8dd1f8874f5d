"""The shared conformance suite against the production engines rwb runs itself: Qdrant's engine
in process (qdrant-edge-py) and Redis vector search (the Redis at REDIS_URL, which `make test`
starts). Both are checked on the three metrics; Qdrant also with scalar quantization + rescore.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from retrieval.testing.conformance import CHECKS, Conformance, ConformanceCase, run_or_skip

QDRANT = {"m": 16, "ef_construct": 64}
REDIS = {"M": 16, "EF_CONSTRUCTION": 64}
CASES = [
    ConformanceCase("qdrant", "l2", QDRANT),
    ConformanceCase("qdrant", "ip", QDRANT),
    ConformanceCase("qdrant", "cosine", QDRANT),
    ConformanceCase("qdrant", "l2", {**QDRANT, "quantization": "scalar"}, min_recall=0.95,
                    exact_distances=True, label="qdrant-sq8-l2"),
    ConformanceCase("redis", "l2", REDIS),
    ConformanceCase("redis", "ip", REDIS),
    ConformanceCase("redis", "cosine", REDIS),
]


def _skip_reason(case: ConformanceCase) -> str | None:
    if case.backend == "qdrant":
        try:
            import qdrant_edge  # noqa: F401
        except ImportError:
            return "qdrant-edge-py not installed"
    if case.backend == "redis" and not os.environ.get("REDIS_URL"):
        return "REDIS_URL not set (make test starts a Redis with vector search)"
    return None


@pytest.fixture(scope="module")
def suites() -> Iterator[dict[str, Conformance]]:
    cache: dict[str, Conformance] = {}
    yield cache
    for suite in cache.values():
        suite.close()


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(suites: dict[str, Conformance], case: ConformanceCase, check: str) -> None:
    reason = _skip_reason(case)
    if reason:
        pytest.skip(reason)
    suite = suites.get(case.id)
    if suite is None:
        suite = suites[case.id] = Conformance(case)
    run_or_skip(suite, check)
