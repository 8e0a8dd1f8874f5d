"""pgvector's ``sparsevec`` holding BM25 weights: the sparse leg of a fusion on PostgreSQL.

One table ``rwb_<12 hex>`` (``id int8, embedding sparsevec(dim)``; ``dim`` = the BM25
vocabulary), created, marked (:mod:`retrieval.engines.pgvector.owned`) and dropped by this
index only; searched exactly by inner product (``ORDER BY embedding <#> q``, no index: a
sequential scan, so the ranking is exact). The server is ``$RWB_PG_URL``
(NotReachable, exit 3, when none is set or it does not answer).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.engines.pgvector.base import first_line, resolve_url
from retrieval.engines.pgvector.owned import pg_mark, pg_unlock
from retrieval.errors import BackendError, NotReachable
from retrieval.indexes.hybrid import Sparse
from retrieval.redact import redact_uri

log = logging.getLogger(__name__)

WHERE = "sparse leg (pgvector sparsevec)"


class PgSparse:
    """A ``sparsevec`` table of BM25 weights (inner product, exact). ``workdir`` is unused (the
    data lives on the server)."""

    def __init__(self, workdir: Path | None = None, *, url: str | None = None) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        target = resolve_url(url, WHERE)
        try:
            self._conn: Any = psycopg.connect(target, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise NotReachable(f"{WHERE}: cannot connect to PostgreSQL at {redact_uri(target)}: "
                               f"{type(exc).__name__}: {first_line(exc, target)}") from None
        try:
            if self._conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'"
                                  ).fetchone() is None:
                self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(self._conn)
        except psycopg.Error as exc:
            self._conn.close()
            raise BackendError(f"{WHERE}: PostgreSQL at {redact_uri(target)} has no usable "
                               f"pgvector extension: {first_line(exc, target)}") from None
        self.table = f"rwb_{uuid.uuid4().hex[:12]}"
        self._dim = 0
        self._owned = False

    def add(self, docs: Sequence[Sparse]) -> None:
        from pgvector import SparseVector

        self._dim = max((max(d) + 1 for d in docs if d), default=1)
        self._conn.execute(f"CREATE TABLE {self.table} (id int8 NOT NULL, "
                           f"embedding sparsevec({self._dim}))")  # fails on an existing name
        self._owned = True
        pg_mark(self._conn, self.table)
        with self._conn.cursor() as cur, cur.copy(
                f"COPY {self.table} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "sparsevec"])
            for i, d in enumerate(docs):
                if d:
                    copy.write_row((i, SparseVector({int(t): float(w) for t, w in d.items()},
                                                    self._dim)))
        self._conn.execute(f"ANALYZE {self.table}")

    def search(self, query: Sparse, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, inner products > 0) of the top ``k``, best first."""
        from pgvector import SparseVector

        terms = {int(t): float(c) for t, c in query.items() if 0 <= int(t) < self._dim}
        if not terms:
            return np.empty(0, dtype=np.int64), np.empty(0)
        q = SparseVector(terms, self._dim)
        rows = self._conn.execute(
            f"SELECT id, -(embedding <#> %(q)s) FROM {self.table} "
            f"ORDER BY embedding <#> %(q)s LIMIT %(k)s", {"q": q, "k": int(k)}).fetchall()
        rows = [r for r in rows if r[1] > 0]  # a document sharing no term is no candidate
        return (np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[1] for r in rows], dtype=np.float64))

    def close(self) -> None:
        if self._conn.closed:
            return
        try:
            if self._owned:  # the table this index created, and only it
                self._conn.execute(f"DROP TABLE IF EXISTS {self.table}")
                pg_unlock(self._conn, self.table)
                self._owned = False
        finally:
            self._conn.close()


__all__ = ["PgSparse"]
