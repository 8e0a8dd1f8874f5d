"""Per-query recall@k of one config: read from the run (``per_query.parquet``, written by
``rwb eval``) or, for runs that do not store it (sweeps), re-measured on the run's dataset by
rebuilding that one index from the run's ``spec.yaml``."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.errors import DataError
from retrieval.reporting.load import Run

log = logging.getLogger(__name__)


def stored_per_query(run: Run, point: Mapping[str, Any]) -> np.ndarray | None:
    """Per-query recall@k (by id) of ``point`` from the run's per_query.parquet, or None."""
    table = run.table("per_query.parquet")
    if table is None:
        return None
    build = json.dumps(point.get("build") or {}, sort_keys=True)
    search = json.dumps(point.get("search") or {}, sort_keys=True)
    sub = table[(table["backend"] == point.get("backend")) & (table["build"] == build)
                & (table["search"] == search)]
    if sub.empty:
        return None
    return sub.sort_values("query")["recall"].to_numpy(dtype=np.float64)


def remeasure_per_query(run: Run, point: Mapping[str, Any]) -> np.ndarray:
    """Rebuild ``point``'s index from the run's spec and dataset, search every query once in
    batch mode, and return per-query recall@k (by id). Costs one index build."""
    from retrieval.evaluation import Evaluator
    from retrieval.specfile import read_yaml
    from retrieval.tune.runner import load_vectors
    from retrieval.tune.spec import parse_spec

    spec_path = run.path / "spec.yaml"
    if not spec_path.is_file():
        raise DataError(f"run '{run.path}' has no spec.yaml to re-measure from")
    spec = parse_spec(read_yaml(spec_path), source=str(spec_path))
    ds = load_vectors(spec)
    build = point.get("build") or {}
    with Evaluator(ds, spec.k, threads=spec.threads, seed=spec.seed, warmup=0,
                   batch_repeats=1) as ev:
        built = ev.build(str(point["backend"]), build)
        (m,) = ev.measure(built, point.get("search") or {}, modes=["batch"])
    log.info("re-measured %s %s %s: recall %.4f", point["backend"], build, point.get("search"),
             m.recall)
    return np.asarray(m.per_query_recall, dtype=np.float64)


def per_query_recall(run: Run, point: Mapping[str, Any], *, remeasure: bool = False
                     ) -> np.ndarray | None:
    """Stored per-query recall of ``point``; else re-measured when ``remeasure``; else None."""
    stored = stored_per_query(run, point)
    if stored is not None or not remeasure:
        return stored
    return remeasure_per_query(run, point)


__all__ = ["per_query_recall", "remeasure_per_query", "stored_per_query"]
