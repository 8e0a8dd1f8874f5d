"""``python -m retrieval.services.<x>_server start|stop|status --dir DIR``: the entry points of
the engines' local servers (Redis 8 with search, PostgreSQL + pgvector); ``rwb services
start|stop|status NAME --dir DIR`` runs the same servers (:mod:`retrieval.api.admin`)."""
