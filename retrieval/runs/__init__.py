"""Runs: what rwb writes for every command that measures something.

- :mod:`retrieval.runs.rundir`: the run directory (:class:`RunDir`), the ``--out`` guards, atomic
  writes and the run status;
- :mod:`retrieval.runs.provenance`: what is needed to reproduce a run (manifest.json);
- :mod:`retrieval.runs.kinds`: the run kinds and the typed summaries (summary.json);
- :mod:`retrieval.runs.tables`: the JSON encoder and tidy parquet tables of run files.
"""

from retrieval.runs.kinds import (
    WORKLOAD_COLD,
    WORKLOAD_FILTERED,
    WORKLOAD_LIVE,
    WORKLOAD_PLAIN,
    WORKLOAD_SCALE,
    WORKLOAD_TENANTS,
    WORKLOAD_TOPOLOGY,
    WORKLOADS,
    RunKind,
    RunSummary,
    SummaryPart,
    declares_kind,
    detect_kind,
    run_kinds,
    run_summary,
    summary_model,
    summary_models,
    workload_kind,
)
from retrieval.runs.provenance import (
    CPU_FLAGS,
    THREAD_ENV,
    TRACKED_PACKAGES,
    build_manifest,
    cpu_info,
    git_info,
    package_versions,
    thread_info,
    track_packages,
)
from retrieval.runs.rundir import (
    COMPLETE,
    FAILED,
    RUNNING,
    RunDir,
    check_out_dir,
    check_out_file,
    new_run_id,
    write_atomic,
    written_by_rwb,
)
from retrieval.runs.tables import flatten, json_default, typed_frame

__all__ = [
    "COMPLETE",
    "CPU_FLAGS",
    "FAILED",
    "RUNNING",
    "THREAD_ENV",
    "TRACKED_PACKAGES",
    "WORKLOADS",
    "WORKLOAD_COLD",
    "WORKLOAD_FILTERED",
    "WORKLOAD_LIVE",
    "WORKLOAD_PLAIN",
    "WORKLOAD_SCALE",
    "WORKLOAD_TENANTS",
    "WORKLOAD_TOPOLOGY",
    "RunDir",
    "RunKind",
    "RunSummary",
    "SummaryPart",
    "build_manifest",
    "check_out_dir",
    "check_out_file",
    "cpu_info",
    "declares_kind",
    "detect_kind",
    "flatten",
    "git_info",
    "json_default",
    "new_run_id",
    "package_versions",
    "run_kinds",
    "run_summary",
    "summary_model",
    "summary_models",
    "thread_info",
    "track_packages",
    "typed_frame",
    "workload_kind",
    "write_atomic",
    "written_by_rwb",
]
