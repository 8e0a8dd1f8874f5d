"""HNSW in PostgreSQL with pgvector (``CREATE INDEX ... USING hnsw``), on a real server.

Build params ``m`` and ``ef_construction`` (pgvector's names and limits: m in [2, 100],
ef_construction in [4, 1000] and >= 2*m); search params ``ef_search`` (``hnsw.ef_search``, the
monotone knob), ``iterative_scan`` and ``max_scan_tuples`` (``hnsw.iterative_scan`` /
``hnsw.max_scan_tuples``). The server comes from ``$RWB_PG_URL`` (see
:mod:`retrieval.engines.pgvector.base` for connection, load, plan check and search, and
:mod:`retrieval.engines.pgvector.params` for limits and the metric/operator table). IVFFlat is
the sibling backend ``pgvector-ivfflat``.

Filtered search (``SupportsFilter``, the ``engine`` strategy): attributes are stored as columns
beside the vectors and each filter is a parameterised WHERE clause on the k-NN ORDER BY, with
``hnsw.iterative_scan`` / ``hnsw.max_scan_tuples`` applying; see
:mod:`retrieval.engines.pgvector.filter`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.engines.pgvector.base import PgVectorIndex
from retrieval.engines.pgvector.params import (
    EF_SEARCH_MAX,
    PgHnswBuild,
    PgHnswSearch,
    check_dim,
    check_hnsw_build,
    check_hnsw_search,
)
from retrieval.errors import param_error
from retrieval.indexes.base import MemoryClaim
from retrieval.indexes.inprocess import check_k, unknown_knob
from retrieval.indexes.portable import Hnsw
from retrieval.indexes.registry import register
from retrieval.params import Params


@register
class PgVectorHnsw(PgVectorIndex):
    name = "pgvector"
    family = "hnsw"
    method = "hnsw"
    BuildParams = PgHnswBuild
    SearchParams = PgHnswSearch
    monotone_knobs = ("ef_search",)

    @classmethod
    def check_build_params(cls, build: Params, dim: int) -> None:
        assert isinstance(build, PgHnswBuild)
        check_dim(dim, f"backend '{cls.name}'")
        check_hnsw_build(build, f"backend '{cls.name}' build params")

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        where = f"backend '{cls.name}' search params"
        k = check_k(k, where)
        assert isinstance(search, PgHnswSearch)
        check_hnsw_search(search, k, where)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        """ef_search 1000 (pgvector's largest) with a strict-order iterative scan, so that
        k > 1000 still finds k rows."""
        return {"ef_search": EF_SEARCH_MAX, "iterative_scan": "strict_order"}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """ef_search in [k, 1000]."""
        if knob != "ef_search":
            raise unknown_knob(cls, knob)
        k = check_k(k, f"backend '{cls.name}' knob_range")
        if k > EF_SEARCH_MAX:
            raise param_error("k", f"<= {EF_SEARCH_MAX} (the largest hnsw.ef_search)", k,
                              where=f"backend '{cls.name}'")
        return k, EF_SEARCH_MAX

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Hnsw | None:
        """HNSW as itself; None with an iterative scan on (no other engine has one)."""
        if search.get("iterative_scan", "off") != "off":
            return None
        half = build.get("vector_type", "vector") == "halfvec"
        return Hnsw(int(build["m"]), int(build["ef_construction"]), int(search["ef_search"]),
                    "FP16" if half else None)

    def memory_claim(self) -> MemoryClaim:
        """What the HNSW index holds per row: the vector (4 or 2 bytes a dimension) + layer-0
        links (2*m item pointers of 6 bytes) + tuple headers (~24 bytes); the float32 table is
        the on-disk store a re-rank query reads."""
        b = self.build_params
        assert isinstance(b, PgHnswBuild)
        half = b.vector_type == "halfvec"
        per = (2.0 if half else 4.0) * self.dim + 12.0 * b.m + 24.0
        return MemoryClaim(per, b.vector_type, "disk" if half else None)

    def memory_facts(self) -> dict[str, Any]:
        """PostgreSQL's own figures: ``pg_relation_size`` of the vector index (the pages an
        index scan reads through shared buffers) as the resident figure;
        ``pg_total_relation_size`` (table + TOAST + indexes) as the on-disk bytes."""
        row = self._run(
            "size", f"SELECT pg_relation_size('{self.table}_idx'::regclass), "
            "pg_total_relation_size(%(t)s::regclass), pg_table_size(%(t)s::regclass)",
            {"t": self.table}).fetchone()
        return {"resident_bytes": int(row[0]), "disk_bytes": int(row[1]),
                "table_bytes": int(row[2]),
                "source": "pg_relation_size of the vector index (shared-buffer pages an index "
                          "scan reads); disk: pg_total_relation_size"}

    def _with_clause(self) -> str:
        b = self.build_params
        assert isinstance(b, PgHnswBuild)
        return f" WITH (m = {int(b.m)}, ef_construction = {int(b.ef_construction)})"

    def _set_lines(self) -> list[str]:
        s = self.search_params
        assert isinstance(s, PgHnswSearch)
        return [
            f"SET hnsw.ef_search = {int(s.ef_search)}",
            f"SET hnsw.iterative_scan = {s.iterative_scan}",
            f"SET hnsw.max_scan_tuples = {int(s.max_scan_tuples)}",
        ]
