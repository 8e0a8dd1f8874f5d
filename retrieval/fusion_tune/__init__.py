"""Hybrid fusion tuned with significance (``rwb tune fusion``): dense + BM25 legs fused by RRF or
a convex combination, tuned on a dev split, judged on the test split by a paired test.

- :mod:`~retrieval.fusion_tune.spec`: the spec (YAML -> pydantic, extra="forbid");
- :mod:`~retrieval.fusion_tune.fuse`: pure numpy fusion, normalisation and the paired
  randomisation test (golden-tested);
- :mod:`~retrieval.fusion_tune.run`: live I/O (collection, legs, timing) and the run directory;
- :mod:`~retrieval.fusion_tune.summary`: the ``fusion-tune`` summary model and its printer.
"""
