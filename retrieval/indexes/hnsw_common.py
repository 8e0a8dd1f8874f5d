"""Parameters and cross-field checks shared by the HNSW backends (hnswlib, faiss-hnsw).

Not a backend: no ``register`` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from retrieval.errors import param_error
from retrieval.indexes.inprocess import InProcessIndex, check_k, unknown_knob
from retrieval.indexes.portable import Hnsw
from retrieval.params import Params

#: largest ef_search accepted (the tuner's upper bound; larger values only cost time)
EF_SEARCH_MAX = 4096


class HnswBuild(Params):
    """HNSW graph build parameters.

    ``M``: links per node (layer 0 has 2*M); ``ef_construction``: candidate list size while
    inserting (larger = better graph, slower build).
    """

    M: int = Field(16, ge=2, le=256)
    ef_construction: int = Field(200, ge=1, le=16384)


class HnswSearch(Params):
    """``ef_search``: candidate list size per query; must be >= k (checked at search time)."""

    ef_search: int = Field(64, ge=1, le=EF_SEARCH_MAX)


class HnswChecks(InProcessIndex):
    """Class-level checks shared by the HNSW backends."""

    family = "hnsw"
    BuildParams = HnswBuild
    SearchParams = HnswSearch
    monotone_knobs = ("ef_search",)

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        """``ef_search >= k``: hnswlib silently searches with max(ef, k) and faiss returns k ids
        at low recall, so a smaller ef_search would be measured as something it is not."""
        where = f"backend '{cls.name}' search params"
        k = check_k(k, where)
        assert isinstance(search, HnswSearch)
        ef = search.ef_search
        if ef < k:
            raise param_error("ef_search", f">= k ({k}) and <= {EF_SEARCH_MAX}", ef, where=where)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        return {"ef_search": EF_SEARCH_MAX}

    @classmethod
    def dominant_param(cls) -> str:
        """A larger ``ef_construction`` (same ``M``) is taken never to search worse
        (:class:`~retrieval.indexes.base.SupportsDominantBuild`)."""
        return "ef_construction"

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Hnsw:
        """Export mapping (hnswlib and faiss-hnsw alike): the HNSW params as themselves."""
        return Hnsw(int(build["M"]), int(build["ef_construction"]), int(search["ef_search"]))

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """ef_search in [k, 4096]."""
        if knob != "ef_search":
            raise unknown_knob(cls, knob)
        k = check_k(k, f"backend '{cls.name}' knob_range")
        if k > EF_SEARCH_MAX:
            raise param_error("k", f"<= {EF_SEARCH_MAX} (the largest ef_search)", k,
                              where=f"backend '{cls.name}'")
        return k, EF_SEARCH_MAX
