"""The built-in workload kinds of ``rwb sweep``, one module each; every module registers its
:class:`retrieval.tune.workloads.WorkloadKindDef` when imported (the registry imports them all by
discovery, so adding a kind never edits a list)."""
