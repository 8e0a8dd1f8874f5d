"""Live collections: the user's own, attached read-only (see :mod:`retrieval.indexes.live`);
`rwb watch` (:mod:`retrieval.live.watch`, :mod:`retrieval.live.watch_run`)."""
