"""Parameter models and limits of the pgvector backends (``pgvector`` HNSW, ``pgvector-ivfflat``).

Names are pgvector's own: build ``m`` / ``ef_construction`` (``CREATE INDEX ... USING hnsw ...
WITH (m = .., ef_construction = ..)``) and ``lists`` (ivfflat); search ``ef_search``,
``iterative_scan``, ``max_scan_tuples`` (the ``hnsw.*`` settings) and ``probes``
(``ivfflat.probes``). Every limit pgvector 0.8 enforces is checked here, before anything reaches
the server, with one line naming the field, the allowed range and the value received.

Metrics and distances (pgvector operator -> rwb distance, lower is closer):

- ``l2``: ``vector_l2_ops`` / ``<->`` is the Euclidean distance; rwb reports its square;
- ``ip``: ``vector_ip_ops`` / ``<#>`` is the *negative* inner product, as rwb's ``ip``;
- ``cosine``: ``vector_cosine_ops`` / ``<=>`` is ``1 - cos``, as rwb's ``cosine``.

Not a backend module: nothing registers here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from retrieval.errors import ConfigError, param_error
from retrieval.params import Params

#: pgvector's HNSW limits (src/hnsw.h): m 2..100, ef_construction 4..1000 and >= 2 * m,
#: hnsw.ef_search 1..1000; an index on ``vector`` holds at most 2000 dimensions.
M_MIN, M_MAX = 2, 100
EF_CONSTRUCTION_MIN, EF_CONSTRUCTION_MAX = 4, 1000
EF_SEARCH_MIN, EF_SEARCH_MAX = 1, 1000
MAX_SCAN_TUPLES_MAX = 2**31 - 1
#: pgvector's IVFFlat limits (src/ivfflat.h): lists 1..32768, ivfflat.probes 1..lists.
LISTS_MIN, LISTS_MAX = 1, 32768
#: dimensions an HNSW or IVFFlat index on the ``vector`` type accepts
INDEX_DIM_MAX = 2000

OPS = {"l2": "vector_l2_ops", "ip": "vector_ip_ops", "cosine": "vector_cosine_ops"}
#: operator classes of an index over ``embedding::halfvec(dim)`` (half-precision storage)
HALF_OPS = {m: "halfvec" + ops[len("vector"):] for m, ops in OPS.items()}
#: the operator class and operator of an index over ``binary_quantize(embedding)::bit(dim)``
#: (one bit a dimension, its sign; Hamming distance whatever the metric: the metric's own
#: operator re-ranks the candidates by the float32 column)
BIT_OPS, BIT_OPERATOR = "bit_hamming_ops", "<~>"
VectorType = Literal["vector", "halfvec", "bit"]


def vector_expr(vector_type: str, dim: int, column: str = "embedding") -> str:
    """The indexed expression: the column, its half-precision cast or its binary quantization
    (an expression index)."""
    if vector_type == "bit":
        return f"(binary_quantize({column})::bit({int(dim)}))"
    return column if vector_type == "vector" else f"({column}::halfvec({int(dim)}))"


def query_expr(vector_type: str, dim: int, param: str) -> str:
    """The query parameter, cast (or binary-quantized) like the indexed expression."""
    if vector_type == "bit":
        return f"binary_quantize({param}::vector({int(dim)}))::bit({int(dim)})"
    return param if vector_type == "vector" else f"{param}::halfvec({int(dim)})"


def opclass(vector_type: str, metric: str) -> str:
    if vector_type == "bit":
        return BIT_OPS
    return (OPS if vector_type == "vector" else HALF_OPS)[metric]
OPERATOR = {"l2": "<->", "ip": "<#>", "cosine": "<=>"}


def index_operator(vector_type: str, metric: str) -> str:
    """The operator the index answers (``<~>`` Hamming for ``bit``)."""
    return BIT_OPERATOR if vector_type == "bit" else OPERATOR[metric]


def rerank_sql(table: str, dim: int, metric: str, param: str, inner_limit: str,
               limit: str, column: str = "embedding") -> str:
    """The re-rank query of a ``bit`` index: the ``inner_limit`` nearest rows by Hamming
    distance on the binary index, re-ranked by the metric's own distance on the float32
    column (returns ``id, distance``)."""
    v, q = vector_expr("bit", dim, column), query_expr("bit", dim, param)
    op = OPERATOR[metric]
    return (f"SELECT id, {column} {op} {param} FROM (SELECT id, {column} FROM {table} "
            f"ORDER BY {v} {BIT_OPERATOR} {q} LIMIT {inner_limit}) c "
            f"ORDER BY {column} {op} {param} LIMIT {limit}")

IterativeScan = Literal["off", "relaxed_order", "strict_order"]


class PgHnswBuild(Params):
    """``m``: links per node (layer 0 has 2*m); ``ef_construction``: candidate list while
    inserting, >= 2*m (pgvector's defaults 16 and 64); ``vector_type``: ``vector`` (float32)
    or ``halfvec`` (an expression index over ``embedding::halfvec(dim)``: the index holds 2 bytes
    a dimension; the table keeps the float32 column) or ``bit`` (an expression index over
    ``binary_quantize(embedding)::bit(dim)``, Hamming distance: one bit a dimension; the query
    re-ranks ``k * oversample`` candidates by the float32 column)."""

    m: int = Field(16, ge=M_MIN, le=M_MAX, description="links per node")
    ef_construction: int = Field(64, ge=EF_CONSTRUCTION_MIN, le=EF_CONSTRUCTION_MAX,
                                 description="build-time candidate list, >= 2*m")
    vector_type: VectorType = "vector"


class PgHnswSearch(Params):
    """``ef_search`` (``hnsw.ef_search``, >= k unless an iterative scan is on);
    ``iterative_scan`` (``hnsw.iterative_scan``: off | relaxed_order | strict_order: keep
    scanning the graph until k rows are found); ``max_scan_tuples`` (``hnsw.max_scan_tuples``:
    the most tuples an iterative scan visits)."""

    ef_search: int = Field(40, ge=EF_SEARCH_MIN, le=EF_SEARCH_MAX,
                           description="candidate list per query")
    iterative_scan: IterativeScan = "off"
    max_scan_tuples: int = Field(20000, ge=1, le=MAX_SCAN_TUPLES_MAX,
                                 description="tuples an iterative scan may visit")
    oversample: int | None = Field(
        None, ge=1, le=EF_SEARCH_MAX,
        description="vector_type bit only: the binary index returns k * oversample candidates "
                    "(at most ef_search without an iterative scan), re-ranked by the float32 "
                    "column; None: 1")

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``oversample`` is dumped only when set (it exists for ``bit`` builds only)."""
        out = handler(self)
        if out.get("oversample") is None:
            out.pop("oversample", None)
        return dict(out)


class PgIvfBuild(Params):
    """``lists``: k-means cells (pgvector's default 100), at most the number of rows."""

    lists: int = Field(100, ge=LISTS_MIN, le=LISTS_MAX, description="k-means cells")


class PgIvfSearch(Params):
    """``probes`` (``ivfflat.probes``): cells scanned per query, 1..lists."""

    probes: int = Field(1, ge=1, le=LISTS_MAX, description="cells scanned, <= lists")


def check_dim(dim: int, where: str) -> None:
    """An HNSW / IVFFlat index on ``vector`` takes at most 2000 dimensions."""
    if dim > INDEX_DIM_MAX:
        raise ConfigError(
            f"{where}: field 'dim' must be <= {INDEX_DIM_MAX} (pgvector indexes the vector "
            f"type up to {INDEX_DIM_MAX} dimensions; halfvec would be needed beyond); "
            f"received {dim}"
        )


def check_hnsw_build(build: PgHnswBuild, where: str) -> None:
    if build.ef_construction < 2 * build.m:
        raise param_error("ef_construction", f">= 2 * m ({2 * build.m}) and <= "
                          f"{EF_CONSTRUCTION_MAX}", build.ef_construction, where=where)


def check_hnsw_search(search: PgHnswSearch, k: int, where: str) -> None:
    """``ef_search >= k`` with no iterative scan (pgvector returns at most ef_search rows);
    with one on, ``ef_search >= min(k, 1000)`` (the scan goes on until k rows are found)."""
    need = k if search.iterative_scan == "off" else min(k, EF_SEARCH_MAX)
    if search.ef_search < need:
        if search.iterative_scan == "off" and k > EF_SEARCH_MAX:
            allowed = (f">= k ({k}), which exceeds {EF_SEARCH_MAX}: set iterative_scan to "
                       f"relaxed_order or strict_order for k > {EF_SEARCH_MAX}")
        else:
            allowed = f">= k ({need}) and <= {EF_SEARCH_MAX}"
        raise param_error("ef_search", allowed, search.ef_search, where=where)


def check_oversample(build: PgHnswBuild, search: PgHnswSearch, where: str) -> None:
    """``oversample`` above 1 belongs to a ``bit`` build (the re-rank of a binary index; 1
    changes nothing anywhere)."""
    if search.oversample not in (None, 1) and build.vector_type != "bit":
        raise param_error("oversample", "1 or unset unless vector_type is bit (it sizes the "
                          f"re-rank of a binary index; this build is {build.vector_type})",
                          search.oversample, where=where)


def check_ivf_search(build: PgIvfBuild, search: PgIvfSearch, where: str) -> None:
    if search.probes > build.lists:
        raise param_error("probes", f"in [1, lists ({build.lists})]", search.probes, where=where)
