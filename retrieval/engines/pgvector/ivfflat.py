"""IVFFlat in PostgreSQL with pgvector (``CREATE INDEX ... USING ivfflat``), on a real server.

Build param ``lists`` (k-means cells, [1, 32768] and at most the number of rows); search param
``probes`` (``ivfflat.probes``, [1, lists], the monotone knob). Shared machinery (connection,
binary COPY, timed build, EXPLAIN check, prepared search, sizes):
:mod:`retrieval.engines.pgvector.base`. HNSW is the sibling backend ``pgvector``.

Filtered search (``SupportsFilter``, the ``engine`` strategy): attributes are stored as columns
beside the vectors and each filter is a parameterised WHERE clause on the k-NN ORDER BY (no
iterative scan here: the matches inside the ``probes`` lists, -1 padded); see
:mod:`retrieval.engines.pgvector.filter`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.engines.pgvector.base import PgVectorIndex
from retrieval.engines.pgvector.params import PgIvfBuild, PgIvfSearch, check_ivf_search
from retrieval.errors import param_error
from retrieval.indexes.inprocess import check_k, unknown_knob
from retrieval.indexes.portable import Ivf
from retrieval.indexes.registry import register
from retrieval.params import Params, validate_params


@register
class PgVectorIvfFlat(PgVectorIndex):
    name = "pgvector-ivfflat"
    family = "ivf"
    method = "ivfflat"
    BuildParams = PgIvfBuild
    SearchParams = PgIvfSearch
    monotone_knobs = ("probes",)

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        where = f"backend '{cls.name}' search params"
        check_k(k, where)
        assert isinstance(build, PgIvfBuild) and isinstance(search, PgIvfSearch)
        check_ivf_search(build, search, where)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        assert isinstance(build, PgIvfBuild)
        return {"probes": build.lists}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """probes in [1, lists]."""
        if knob != "probes":
            raise unknown_knob(cls, knob)
        assert isinstance(build, PgIvfBuild)
        return 1, build.lists

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Ivf:
        return Ivf(int(build["lists"]), int(search["probes"]))

    def set_search_params(self, params: Params | None = None, /, **kw: Any) -> None:
        """As every backend, plus ``probes <= lists`` checked before the ``SET`` reaches the
        server (a rejected update leaves the params as they were)."""
        where = f"backend '{self.name}' search params"
        candidate = params if params is not None else validate_params(
            self.SearchParams, {**self.search_params.model_dump(), **kw}, where=where)
        assert isinstance(self.build_params, PgIvfBuild)
        if isinstance(candidate, PgIvfSearch):
            check_ivf_search(self.build_params, candidate, where)
        super().set_search_params(params, **kw)

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        b = self.build_params
        assert isinstance(b, PgIvfBuild)
        if b.lists > x.shape[0]:
            raise param_error("lists", f"<= the number of vectors ({x.shape[0]})", b.lists,
                              where=f"backend '{self.name}' build params")
        return super()._build(x)

    def _with_clause(self) -> str:
        b = self.build_params
        assert isinstance(b, PgIvfBuild)
        return f" WITH (lists = {int(b.lists)})"

    def _set_lines(self) -> list[str]:
        s = self.search_params
        assert isinstance(s, PgIvfSearch)
        return [f"SET ivfflat.probes = {int(s.probes)}"]
