"""Recall under inserts and deletes (issue 22): a runbook (:mod:`retrieval.workload.runbook`)
applied to each config, recall and its fresh-build control at every search step (drift vs
damage), write throughput, the re-tuned knob, one line of advice per engine.

Roles: :mod:`.spec` (pydantic) -> :mod:`.logic` (pure) -> :mod:`.live` (indexes) ->
:mod:`.run` (the run directory). It sits above ``tune`` (the target search and the recall
bounds) and ``bench`` in the layer contract.
"""

from retrieval.churn.spec import ChurnConfig, ChurnSpec, load_churn_spec, parse_churn_spec

__all__ = ["ChurnConfig", "ChurnSpec", "load_churn_spec", "parse_churn_spec"]
