"""The cross-layer RAG study (``kind: rag-study``): one Optuna search over an index knob, the
rerank depth and the semantic-cache threshold, scored on a tuning split and checked on held-out
queries.

- :mod:`retrieval.study.spec`: the study spec;
- :mod:`retrieval.study.retrieval_leg`, :mod:`retrieval.study.cache_leg`: measure each layer once;
- :mod:`retrieval.study.combine`, :mod:`retrieval.study.optimize`: scores, Pareto set, choice;
- :mod:`retrieval.study.significance`: chosen vs default on held-out queries;
- :mod:`retrieval.study.run`: ``run_study``, which writes the run directory.

Its CLI lives in ``cli/sweep_study.py``, its figures in ``report/study.py``.
"""
