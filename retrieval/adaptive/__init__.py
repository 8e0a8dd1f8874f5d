"""Adaptive per-query policies judged against the tuned fixed setting.

A policy decides something per query (the HNSW ``ef_search`` from a cheap pre-search, when to
stop a restarted search, a cache entry's own hit threshold). It is judged at equal quality: the
policy runs on held-out queries, its mean and 5th-percentile per-query recall@k are measured,
then the cheapest *fixed* setting reaching both on the same queries is searched for, and the
two costs are compared in one unit (distance computations; p50 ms beside). The result says
plainly when the tuned fixed setting wins.

Roles, as elsewhere: :mod:`.spec` (pydantic) -> :mod:`.policy` and :mod:`.cache` (pure numpy)
-> :mod:`.run` (searches through :class:`retrieval.indexes.base.SupportsCountedSearch`) ->
:mod:`.result` (the typed summary entries).
"""
