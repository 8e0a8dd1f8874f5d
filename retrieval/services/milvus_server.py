"""``python -m retrieval.services.milvus_server``: the Milvus engine's local server
(:mod:`retrieval.engines.milvus.server`), kept at this path for callers of the old module."""

from retrieval.engines.milvus.server import *  # noqa: F403  (the same names as before the move)

if __name__ == "__main__":
    from retrieval.engines.milvus.server import main

    raise SystemExit(main())
