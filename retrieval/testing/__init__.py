"""Testing helpers shipped with the library: the backend conformance suite
(:mod:`retrieval.testing.conformance`), a fake index with an exactly known recall curve
(:mod:`retrieval.testing.fake`, registered as backend "fake" only when imported) and a tiny
random cross-encoder for plumbing tests (:mod:`retrieval.testing.tiny_reranker`).

Nothing is imported here, so importing one helper never registers the fake backend.
"""
