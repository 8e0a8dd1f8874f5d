"""Exact ground truth: :mod:`~retrieval.groundtruth.exact` (the top-k of a static dataset, cached
by data fingerprint), :mod:`~retrieval.groundtruth.ooc` (out of core: chunked, checkpointed,
sharded over workers) and :mod:`~retrieval.groundtruth.live` (kept incrementally over a set
that inserts and deletes change). One tie rule for all three: by distance, then by id."""
