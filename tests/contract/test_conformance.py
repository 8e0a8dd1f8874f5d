"""Every available in-process backend through the library's conformance suite.

Milvus has its own contract file (it needs a server per test worker); "fake" is checked here
with a build config that reaches recall 1.0 (see retrieval.testing.fake).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval.indexes import backend_status
from retrieval.testing.conformance import CHECKS, Conformance, ConformanceCase, run_or_skip

HNSW = {"M": 16, "ef_construction": 64}
KNOWN: dict[str, list[ConformanceCase]] = {
    "hnswlib": [
        ConformanceCase("hnswlib", "l2", HNSW),
        ConformanceCase("hnswlib", "ip", HNSW),
        ConformanceCase("hnswlib", "cosine", HNSW),
    ],
    "faiss-hnsw": [
        ConformanceCase("faiss-hnsw", "l2", HNSW),
        ConformanceCase("faiss-hnsw", "ip", HNSW),
        ConformanceCase("faiss-hnsw", "cosine", HNSW),
    ],
    "faiss-ivf": [
        ConformanceCase("faiss-ivf", "l2", {"nlist": 32}, label="faiss-ivf-flat-l2"),
        ConformanceCase("faiss-ivf", "l2", {"nlist": 32, "encoding": "sq8"}, min_recall=0.97,
                        exact_distances=False, label="faiss-ivf-sq8-l2"),
        ConformanceCase("faiss-ivf", "ip", {"nlist": 32, "encoding": "sq8", "refine": True},
                        label="faiss-ivf-sq8-refine-ip"),
        ConformanceCase("faiss-ivf", "cosine",
                        {"nlist": 32, "encoding": "pq", "pq_m": 8, "pq_nbits": 4, "refine": True},
                        knobs_with_effect=("nprobe", "k_factor"),
                        label="faiss-ivf-pq-refine-cosine"),
    ],
    "faiss-flat": [ConformanceCase("faiss-flat", "l2")],
    # LanceDB: IVF_PQ (exact distances by refine_factor); IVF_HNSW_SQ (SQ distances)
    # 7 partitions: the writes check builds on 2/3 of the 3000 rows (LanceDB: <= n // 256)
    "lancedb-ivfpq": [ConformanceCase("lancedb-ivfpq", m, {"num_partitions": 7})
                      for m in ("l2", "ip", "cosine")],
    "lancedb-hnsw": [ConformanceCase("lancedb-hnsw", m, {"m": 16, "ef_construction": 64,
                                                         "num_partitions": 2},
                                     min_recall=0.95, exact_distances=False)
                     for m in ("l2", "ip", "cosine")],
}
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
