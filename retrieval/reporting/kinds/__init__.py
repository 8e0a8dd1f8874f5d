"""One module per run kind (and workload shape) that the report renders: each registers its
figures and tables with :mod:`retrieval.reporting.registry` (discovered by import)."""
