"""The shared conformance suite against the pgvector backends on a real PostgreSQL server
(``pgvector`` HNSW in all three metrics, ``pgvector-ivfflat``). The server: ``$RWB_PG_URL``
(``make test`` starts one) or a private one the ``pg_url`` fixture starts."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg", reason="psycopg not installed (extra 'pgvector')")
pytest.importorskip("pgvector", reason="pgvector not installed (extra 'pgvector')")

from retrieval.testing.conformance import BackendConformance, ConformanceCase

pytestmark = pytest.mark.pgvector
HNSW = {"m": 16, "ef_construction": 64}


@pytest.mark.usefixtures("pg_url")  # it points $RWB_PG_URL, which the backends read, at its server
class _PgConformance(BackendConformance):
    pass


class TestPgvectorHnswL2(_PgConformance):
    case = ConformanceCase("pgvector", "l2", HNSW, label="pgvector-hnsw-l2")


class TestPgvectorHnswIp(_PgConformance):
    case = ConformanceCase("pgvector", "ip", HNSW, label="pgvector-hnsw-ip")


class TestPgvectorHnswCosine(_PgConformance):
    case = ConformanceCase("pgvector", "cosine", HNSW, label="pgvector-hnsw-cosine")


class TestPgvectorIvfflat(_PgConformance):
    case = ConformanceCase("pgvector-ivfflat", "l2", {"lists": 32}, label="pgvector-ivfflat-l2")
