"""Every available in-process backend through the library's conformance suite.

Milvus has its own contract file (it needs a server per test worker); "fake" is checked here
with a build config that reaches recall 1.0 (see retrieval.testing.fake).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval.indexes import backend_status
from retrieval.testing.conformance import (
    CHECKS,
    Conformance,
    ConformanceCase,
    engine_cases,
    run_or_skip,
)

#: each engine declares its cases in its descriptor (``conformance``)
KNOWN: dict[str, list[ConformanceCase]] = engine_cases()
# own contract files; fake: below
SKIP = {"milvus", "fake", "pgvector", "pgvector-ivfflat", "qdrant", "redis"}


def _cases() -> list[ConformanceCase]:
    cases: list[ConformanceCase] = []
    for status in backend_status():
        if status.name in SKIP or not status.available:
            continue
        cases.extend(KNOWN.get(status.name, [ConformanceCase(status.name)]))
    cases.append(ConformanceCase("fake", "l2", {"quality": 1.1, "us_per_ef": 0.0},
                                 knobs_with_effect=("ef_search",)))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def suites() -> Iterator[dict[str, Conformance]]:
    import retrieval.testing.fake  # noqa: F401  (registers "fake")

    cache: dict[str, Conformance] = {}
    yield cache
    for suite in cache.values():
        suite.close()


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(suites: dict[str, Conformance], case: ConformanceCase, check: str) -> None:
    suite = suites.get(case.id)
    if suite is None:
        suite = suites[case.id] = Conformance(case)
    run_or_skip(suite, check)


def test_every_metric_is_covered() -> None:
    assert {c.metric for c in CASES if c.backend != "fake"} >= {"l2", "ip", "cosine"}


@pytest.mark.parametrize("backend", ["qdrant", "redis", "milvus", "lancedb-ivfpq",
                                     "lancedb-hnsw", "hnswlib", "faiss-flat", "faiss-ivf",
                                     "pgvector"])
def test_engine_claims_writes(backend: str) -> None:
    """These engines take inserts and deletes (the conformance 'writes' check then runs the
    sequence on the real engine instead of checking a one-line refusal)."""
    from retrieval.indexes.base import SupportsWrites
    from retrieval.indexes.registry import get_backend

    status = {s.name: s for s in backend_status()}
    if backend not in status or not status[backend].available:
        pytest.skip(f"{backend} is not installed")
    cls = get_backend(backend)
    assert issubclass(cls, SupportsWrites), backend
    assert "not drive" not in getattr(cls, "writes_refusal", "")
