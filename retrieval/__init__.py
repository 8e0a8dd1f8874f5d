"""retrieval-workbench (`rwb`): measure and tune the retrieval layer of RAG systems offline.

The Python API (the command line's verbs, typed results with ``to_frame()``)::

    import retrieval

    ds = retrieval.VectorDataset.from_arrays(base, queries, "cosine")
    run = retrieval.evaluate({"k": 10, "indexes": [{"backend": "faiss-flat"}]}, dataset=ds)
    run.to_frame()                                   # one row per measured config
    tuned = retrieval.sweep("sweeps/quickstart.yaml", target_recall=0.95, out="runs/tuned")
    retrieval.export(tuned, "hnswlib", "tuned.yaml"); retrieval.verify("tuned.yaml")
    retrieval.plots.recall_vs_latency(tuned.points(), k=10, target=0.95)

Verbs: ``evaluate``, ``sweep``, ``tune_rerank``, ``tune_cache``, ``bench_embed``,
``bench_fanout``, ``export``, ``verify``, ``report``, ``open_run`` (:mod:`retrieval.api.verbs`).
Everything is imported on first use, so ``import retrieval`` loads no numpy, pandas or faiss.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from retrieval._version import __version__

#: verbs named like a submodule (``retrieval/evaluation.py``, ``retrieval/exporting/``,
#: ``retrieval/reporting/``): once that module is imported it is the attribute (the import system
#: binds it) and calling it runs the verb; before, the attribute is the verb itself
_CALLABLE = ("evaluate", "export", "report")
_VERBS = ("bench_embed", "bench_fanout", "evaluate", "export", "open_run", "report", "sweep",
          "tune_cache", "tune_rerank", "verify")
_RESULTS = ("BenchRun", "CacheRun", "EvalRun", "ExportedConfig", "IndexRun", "RerankRun",
            "Report", "RunResult", "StudyRun", "SweepRun", "Verification")
#: public name -> module that defines it (imported on first access)
_LAZY: dict[str, str] = {
    **{name: "retrieval.api" for name in (*_VERBS, *_RESULTS) if name not in _CALLABLE},
    "VectorDataset": "retrieval.data",
    "RwbError": "retrieval.errors",
    "ConfigError": "retrieval.errors",
    "DataError": "retrieval.errors",
}
_MODULES = {"plots": "retrieval.api.plots"}

__all__ = sorted([*_LAZY, *_MODULES, *_CALLABLE, "__version__"])  # types: __init__.pyi


class _VerbPackage(types.ModuleType):
    """A submodule that is also its verb: ``retrieval.export(run, engine, out)`` calls
    :func:`retrieval.api.verbs.export` while ``retrieval.exporting.registry`` is the module."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        verb = getattr(importlib.import_module("retrieval.api.verbs"), self.__name__[10:])
        return verb(*args, **kwargs)


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # the import system binds each imported submodule here: make the verb ones callable
        if name in _CALLABLE and type(value) is types.ModuleType:
            value.__class__ = _VerbPackage
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _CALLABLE:  # the verb (not bound in globals: the submodule may replace it)
        return getattr(importlib.import_module("retrieval.api.verbs"), name)
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
