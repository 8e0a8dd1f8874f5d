"""Redis with vector search (RediSearch HNSW / FLAT): the backend, TAG / NUMERIC filters, the
``FT.CREATE`` + KNN export with its inverse, and the local server (PyPI wheels)."""

from retrieval.engines.redis import export, hybrid, index, live
from retrieval.engines.redis.owned import collect_leftovers
from retrieval.engines.redis.server import SERVICE
from retrieval.indexes.engine import EngineDescriptor, Leftovers, register_engine

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
    service=SERVICE,
    leftovers=Leftovers(env=index.URL_ENV, label="Redis", option="--redis-url",
                        collect=collect_leftovers),
    attach=live.attach,
    summary="Redis 8 / Redis Stack vector search over a URL",
    hybrid=hybrid.HYBRID,
))
