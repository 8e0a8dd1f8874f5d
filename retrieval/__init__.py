"""retrieval-workbench (`rwb`): measure and tune the retrieval layer of RAG systems offline.

The Python API (the command line's verbs, typed results with ``to_frame()``)::

    import retrieval

    ds = retrieval.VectorDataset.from_arrays(base, queries, "cosine")
    run = retrieval.evaluate({"k": 10, "indexes": [{"backend": "faiss-flat"}]}, dataset=ds)
    run.to_frame()                                   # one row per measured config
    tuned = retrieval.sweep("sweeps/quickstart.yaml", target_recall=0.95, out="runs/tuned")
    retrieval.export(tuned, "hnswlib", "tuned.yaml"); retrieval.verify("tuned.yaml")
    retrieval.plots.recall_vs_latency(tuned.points(), k=10, target=0.95)

Specs: a YAML path, a mapping, or a typed spec object (``SweepSpec``, ``RerankSweepSpec``,
``CacheTuneSpec``, ``FusionTuneSpec``, ``StudySpec``, ``FanoutSpec``, ``EmbedBenchConfig``,
``ProfileSpec``: the pydantic models the YAML is validated into). Verbs: ``evaluate``, ``sweep``,
``tune_rerank``, ``tune_cache``, ``tune_fusion``, ``bench_churn``, ``bench_embed``,
``bench_fanout``, ``bench_load``, ``profile``, ``export``, ``verify``, ``report``, ``open_run``
(:mod:`retrieval.api.verbs`, :mod:`retrieval.api.profiler`).
Everything is imported on first use, so ``import retrieval`` loads no numpy, pandas or faiss.
"""

from __future__ import annotations

import importlib
from typing import Any

from retrieval._version import __version__ as __version__

_VERBS = ("bench_churn", "bench_embed", "bench_fanout", "bench_load", "evaluate", "export",
          "open_run", "profile", "report", "sweep", "tune_cache", "tune_fusion", "tune_rerank",
          "verify", "watch")
_RESULTS = ("BenchRun", "CacheRun", "EvalRun", "ExportedConfig", "FusionRun", "IndexRun",
            "ProfileRun", "ProfileRunResult", "RerankRun", "Report", "RunResult", "StudyRun",
            "SweepRun", "Verification", "WatchRun")
#: public name -> module that defines it (imported on first access). No submodule of this
#: package shares a verb's name (the evaluation loop is :mod:`retrieval.evaluation`, the
#: exporters :mod:`retrieval.exporting`, the plots :mod:`retrieval.reporting`, the pipeline
#: profiler :mod:`retrieval.profiling`), so each verb is a plain function whatever was
#: imported before (importing a submodule binds it on this package under its own name).
_LAZY: dict[str, str] = {
    **{name: "retrieval.api" for name in (*_VERBS, *_RESULTS)},
    "VectorDataset": "retrieval.data",
    # the typed spec objects the verbs take as well as YAML paths and mappings
    "SweepSpec": "retrieval.tune.spec",
    "IndexEntry": "retrieval.tune.spec",
    "RerankSweepSpec": "retrieval.rerank.spec",
    "RerankerSpec": "retrieval.rerank.spec",
    "CacheTuneSpec": "retrieval.cache.spec",
    "FusionTuneSpec": "retrieval.fusion_tune.spec",
    "StudySpec": "retrieval.study.spec",
    "FanoutSpec": "retrieval.bench.fanout.spec",
    "EmbedBenchConfig": "retrieval.bench.embed.spec",
    "ProfileSpec": "retrieval.profiling.spec",
    "RwbError": "retrieval.errors",
    "ConfigError": "retrieval.errors",
    "DataError": "retrieval.errors",
}
_MODULES = {"plots": "retrieval.api.plots"}

__all__ = sorted([*_LAZY, *_MODULES, "__version__"])  # types: __init__.pyi


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value: Any = importlib.import_module(_MODULES[name])
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'retrieval' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__() -> list[str]:  # the public names (and the dunders), not this module's helpers
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
