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
    check_oversample,
)
from retrieval.engines.pgvector.segments import tree_sql
from retrieval.errors import ConfigError, param_error
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
    #: ef_search; for a ``bit`` build also oversample (per build: monotone_knobs_for)
    monotone_knobs = ("ef_search", "oversample")

    @classmethod
    def check_build_params(cls, build: Params, dim: int) -> None:
        assert isinstance(build, PgHnswBuild)
        check_dim(dim, f"backend '{cls.name}'")
        check_hnsw_build(build, f"backend '{cls.name}' build params")

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        where = f"backend '{cls.name}' search params"
        k = check_k(k, where)
        assert isinstance(search, PgHnswSearch) and isinstance(build, PgHnswBuild)
        check_hnsw_search(search, k, where)
        check_oversample(build, search, where)

    def set_search_params(self, params: Params | None = None, /, **kw: Any) -> None:
        """As every backend; an ``oversample`` above 1 on a build that is not ``bit`` is refused
        here, at once, and the params stay as they were (it needs no ``k``)."""
        before = self.search_params
        super().set_search_params(params, **kw)
        b, s = self.build_params, self.search_params
        assert isinstance(b, PgHnswBuild) and isinstance(s, PgHnswSearch)
        try:
            check_oversample(b, s, f"backend '{self.name}' search params")
        except ConfigError:
            super().set_search_params(before)
            raise

    @classmethod
    def monotone_knobs_for(cls, build: Params | None) -> tuple[str, ...]:
        """``ef_search``; for a ``bit`` build also ``oversample`` (more candidates re-ranked
        exactly: recall non-decreasing, up to ef_search candidates without an iterative scan)."""
        if isinstance(build, PgHnswBuild) and build.vector_type == "bit":
            return cls.monotone_knobs
        return ("ef_search",)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        """ef_search 1000 (pgvector's largest) with a strict-order iterative scan, so that
        k > 1000 still finds k rows; a ``bit`` build re-ranks up to k * 1000 candidates."""
        out: dict[str, Any] = {"ef_search": EF_SEARCH_MAX, "iterative_scan": "strict_order"}
        if isinstance(build, PgHnswBuild) and build.vector_type == "bit":
            out["oversample"] = EF_SEARCH_MAX
        return out

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """ef_search in [k, 1000]; oversample in [1, 1000 // k] on a bit build (the candidates
        k * oversample fit in the largest ef_search), else [1, 1]."""
        k = check_k(k, f"backend '{cls.name}' knob_range")
        if knob == "oversample":  # [1, 1] unless bit: it re-ranks nothing on other builds
            bit = isinstance(build, PgHnswBuild) and build.vector_type == "bit"
            return 1, max(1, EF_SEARCH_MAX // k) if bit else 1
        if knob != "ef_search":
            raise unknown_knob(cls, knob)
        if k > EF_SEARCH_MAX:
            raise param_error("k", f"<= {EF_SEARCH_MAX} (the largest hnsw.ef_search)", k,
                              where=f"backend '{cls.name}'")
        return k, EF_SEARCH_MAX

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Hnsw | None:
        """HNSW as itself; None with an iterative scan on (no other engine has one)."""
        if search.get("iterative_scan", "off") != "off":
            return None
        vtype = build.get("vector_type", "vector")
        if vtype == "bit":  # binary codes; the re-rank depth travels as pgvector's own
            return Hnsw(int(build["m"]), int(build["ef_construction"]), int(search["ef_search"]),
                        "BQ", native_engine="pgvector",
                        native=(("oversample", int(search.get("oversample") or 1)),))
        return Hnsw(int(build["m"]), int(build["ef_construction"]), int(search["ef_search"]),
                    "FP16" if vtype == "halfvec" else None)

    def memory_claim(self) -> MemoryClaim:
        """What the HNSW index holds per row: the vector (4 or 2 bytes a dimension, or one bit
        for ``bit``) + layer-0 links (2*m item pointers of 6 bytes) + tuple headers (~24
        bytes); the float32 table is the on-disk store a re-rank query reads."""
        b = self.build_params
        assert isinstance(b, PgHnswBuild)
        per_dim = {"vector": 4.0, "halfvec": 2.0, "bit": 1 / 8}[b.vector_type]
        per = per_dim * self.dim + 12.0 * b.m + 24.0
        return MemoryClaim(per, b.vector_type, None if b.vector_type == "vector" else "disk")

    def memory_facts(self) -> dict[str, Any]:
        """PostgreSQL's own figures (summed over partitions when the table has them):
        ``pg_relation_size`` of the vector index (the pages an
        index scan reads through shared buffers) as the resident figure;
        ``pg_total_relation_size`` (table + TOAST + indexes) as the on-disk bytes."""
        row = self._run(
            "size", f"SELECT (SELECT sum(pg_relation_size(relid)) FROM {tree_sql('%(i)s')}), "
            f"sum(pg_total_relation_size(relid)), sum(pg_table_size(relid)) FROM "
            f"{tree_sql('%(t)s')}",
            {"t": self.table, "i": f"{self.table}_idx"}).fetchone()
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
