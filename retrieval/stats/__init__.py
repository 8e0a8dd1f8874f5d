"""The measures every package shares, each defined once: recall and latency summaries
(:mod:`~retrieval.stats.metrics`), IR metrics through ranx (:mod:`~retrieval.stats.irmetrics`),
binomial upper bounds (:mod:`~retrieval.stats.binomial`), the Pareto front
(:mod:`~retrieval.stats.pareto`) and seeded subsets and splits
(:mod:`~retrieval.stats.sampling`)."""
