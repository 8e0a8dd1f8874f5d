"""The Milvus Lite server (:mod:`retrieval.engines.milvus.server`), kept at this path for
callers of the old module."""

from retrieval.engines.milvus.server import *  # noqa: F403  (the same names as before the move)
