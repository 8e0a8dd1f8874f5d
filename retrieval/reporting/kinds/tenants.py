"""The report of a tenants study (``sweep`` with ``workload: tenants``)."""

from __future__ import annotations

from retrieval.reporting import tenants
from retrieval.reporting.kinds.index import head_table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables
from retrieval.runs import WORKLOAD_TENANTS
from retrieval.tune.summary import SweepSummary


@renders_figures(SweepSummary.KIND, WORKLOAD_TENANTS)
def tenants_figures(run: Run, remeasure: bool) -> Figures:
    per_tenant = run.table("tenants.parquet")
    if per_tenant is None:
        return []
    return [("tenants", "Per-tenant recall by layout",
             tenants.recall_distribution(run.summary, per_tenant),
             "per-tenant recall of each layout's chosen config (tenants.parquet)")]


@renders_tables(SweepSummary.KIND, WORKLOAD_TENANTS)
def tenants_tables(run: Run) -> Tables:
    return [("Summary", head_table(run)), *tenants.tables(run.summary)]
