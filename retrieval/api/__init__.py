"""The public Python API, re-exported by ``import retrieval`` (see :mod:`retrieval`).

- verbs (:mod:`retrieval.api.verbs`): ``evaluate``, ``sweep``, ``tune_rerank``, ``tune_cache``,
  ``bench_embed``, ``bench_fanout``, ``bench_load``, ``bench_churn``, ``export``, ``verify``,
  ``report``, ``open_run``; ``profile`` (:mod:`retrieval.api.profiler`);
- typed results (:mod:`retrieval.api.results`), each with ``to_frame()``;
- figures: :mod:`retrieval.api.plots` (``retrieval.plots``).

This package sits below the CLI and above every other layer (pyproject ``[tool.importlinter]``);
the CLI parses its arguments and calls these verbs (one front door); spec overrides, the
command-line options and the verbs' keyword options alike, are applied in one place,
:func:`retrieval.api.overrides.apply_overrides`.
"""

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

__all__ = [
    "BenchRun",
    "CacheRun",
    "EvalRun",
    "ExportedConfig",
    "FusionRun",
    "IndexRun",
    "ProfileRun",
    "ProfileRunResult",
    "Report",
    "RerankRun",
    "RunResult",
    "StudyRun",
    "SweepRun",
    "Verification",
    "bench_churn",
    "bench_embed",
    "bench_fanout",
    "bench_load",
    "evaluate",
    "export",
    "open_run",
    "profile",
    "report",
    "sweep",
    "tune_cache",
    "tune_fusion",
    "tune_rerank",
    "verify",
]
