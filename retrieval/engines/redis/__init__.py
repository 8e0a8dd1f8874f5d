"""Redis with vector search (RediSearch HNSW / FLAT): the backend, TAG / NUMERIC filters, the
``FT.CREATE`` + KNN export with its inverse, and the local server (PyPI wheels)."""

from retrieval.engines.redis import export, index, live  # noqa: F401  (registers the backend)
from retrieval.indexes.engine import EngineDescriptor, register_engine

ENGINE = register_engine(EngineDescriptor(
    name="redis",
    backends=("redis",),
    extra="redis",
    libraries=("redis",),
    knobs=("EF_RUNTIME",),
    ef_knob="EF_RUNTIME",
    to_native=export.to_native,
    from_native=export.from_native,
    filter_knobs=export.filter_knobs,
    entry_search_fields=("hybrid_query",),
    filter_form="FT.SEARCH idx '(@tag:{a|b} @num:[lo hi])=>[KNN $K @v $BLOB EF_RUNTIME $EF]' "
                "(hybrid query on TAG / NUMERIC fields; TAG values backslash-escaped)",
    server="retrieval.engines.redis.server",
    attach=live.attach,
    summary="Redis 8 / Redis Stack vector search over a URL",
))
