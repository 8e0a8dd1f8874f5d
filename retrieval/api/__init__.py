"""The public Python API, re-exported by ``import retrieval`` (see :mod:`retrieval`).

- verbs (:mod:`retrieval.api.verbs`): ``evaluate``, ``sweep``, ``tune_rerank``, ``tune_cache``,
  ``bench_embed``, ``bench_fanout``, ``bench_load``, ``bench_churn``, ``export``, ``verify``,
  ``report``, ``open_run``; ``profile`` (:mod:`retrieval.api.profiler`); ``watch``
  (:mod:`retrieval.api.watching`);
- typed results (:mod:`retrieval.api.results`), each with ``to_frame()``;
- figures: :mod:`retrieval.api.plots` (``retrieval.plots``);
- administration (:mod:`retrieval.api.admin`): ``list_backends``, ``list_datasets``,
  ``load_dataset_info``, ``pareto_front``, ``services_cleanup``, ``service_start`` /
  ``service_stop`` / ``service_status`` (what ``rwb backends``, ``rwb datasets``, ``rwb pareto``
  and ``rwb services`` call).

This package sits below the CLI and above every other layer (pyproject ``[tool.importlinter]``);
the CLI parses its arguments and calls these verbs (one front door); spec overrides, the
command-line options and the verbs' keyword options alike, are applied in one place,
:func:`retrieval.api.overrides.apply_overrides`.
"""

from retrieval.api.admin import (
    CleanupReport,
    ParetoFront,
    ServiceInfo,
    cleanup_options,
    list_backends,
    list_datasets,
    load_dataset_info,
    pareto_front,
    service_names,
    service_start,
    service_status,
    service_stop,
    services_cleanup,
)
from retrieval.api.profiler import ProfileRun, profile
from retrieval.api.results import (
    BenchRun,
    CacheRun,
    EvalRun,
    ExportedConfig,
    FusionRun,
    IndexRun,
    ProfileRunResult,
    Report,
    RerankRun,
    RunResult,
    StudyRun,
    SweepRun,
    Verification,
)
from retrieval.api.verbs import (
    bench_churn,
    bench_embed,
    bench_fanout,
    bench_load,
    evaluate,
    export,
    open_run,
    report,
    sweep,
    tune_cache,
    tune_fusion,
    tune_rerank,
    verify,
)
from retrieval.api.watching import WatchRun, WatchStop, watch

__all__ = [
    "BenchRun",
    "CacheRun",
    "CleanupReport",
    "EvalRun",
    "ExportedConfig",
    "FusionRun",
    "IndexRun",
    "ParetoFront",
    "ProfileRun",
    "ProfileRunResult",
    "Report",
    "RerankRun",
    "RunResult",
    "ServiceInfo",
    "StudyRun",
    "SweepRun",
    "Verification",
    "WatchRun",
    "WatchStop",
    "bench_churn",
    "bench_embed",
    "bench_fanout",
    "bench_load",
    "cleanup_options",
    "evaluate",
    "export",
    "list_backends",
    "list_datasets",
    "load_dataset_info",
    "open_run",
    "pareto_front",
    "profile",
    "report",
    "service_names",
    "service_start",
    "service_status",
    "service_stop",
    "services_cleanup",
    "sweep",
    "tune_cache",
    "tune_fusion",
    "tune_rerank",
    "verify",
    "watch",
]
