"""``python -m retrieval.services.redis_server``: the redis engine's local server
(:mod:`retrieval.engines.redis.server`), kept at this path for scripts and the Makefile."""

from retrieval.engines.redis.server import *  # noqa: F403  (the same names as before the move)

if __name__ == "__main__":
    from retrieval.engines.redis.server import main

    raise SystemExit(main())
