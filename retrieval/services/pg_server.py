"""``python -m retrieval.services.pg_server``: the pgvector engine's local server
(:mod:`retrieval.engines.pgvector.server`), kept at this path for scripts and the Makefile."""

from retrieval.engines.pgvector.server import *  # noqa: F403  (the same names as before the move)

if __name__ == "__main__":
    from retrieval.engines.pgvector.server import main

    raise SystemExit(main())
