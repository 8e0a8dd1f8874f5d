"""Open any rwb run directory and say what it holds.

The summary is read back through its kind's typed model (:data:`SUMMARY_MODELS`, each defined
next to the code that writes it) into :attr:`Run.model`; :attr:`Run.summary` keeps the plain data
(what the JSON holds) for tables and notebooks.

Kinds (:class:`~retrieval.runs.RunKind`, from ``manifest.json``/``summary.json`` ``kind``, else
recognised by their keys):

- ``eval``: ``rwb eval`` (summary rows, measurements.parquet, per_query.parquet);
- ``sweep``: ``rwb sweep`` of an index spec (rows, builds, backends with ``chosen``, pareto);
- ``bench-embed``, ``bench-fanout``: ``rwb bench embed|fanout``;
- ``rerank-sweep``, ``cache-tune``: ``rwb tune rerank|cache``;
- ``rag-study``: ``rwb sweep sweeps/rag-end-to-end.yaml`` (:mod:`retrieval.study`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from retrieval.bench.summary import EmbedBenchSummary, FanoutBenchSummary, LoadBenchSummary
from retrieval.cache.run import CacheTuneSummary
from retrieval.churn.summary import ChurnBenchSummary
from retrieval.errors import DataError
from retrieval.fusion_tune.summary import FusionTuneSummary
from retrieval.params import format_validation_error
from retrieval.profiling.summary import ProfileSummary
from retrieval.rerank.run import RerankSweepSummary
from retrieval.runs import RunKind, RunSummary
from retrieval.study.run import StudySummary
from retrieval.tune.summary import EvalSummary, SweepSummary

log = logging.getLogger(__name__)

KINDS: tuple[RunKind, ...] = tuple(RunKind)
#: each kind's summary model
SUMMARY_MODELS: dict[RunKind, type[RunSummary]] = {
    m.KIND: m for m in (EvalSummary, SweepSummary, EmbedBenchSummary, FanoutBenchSummary,
                        RerankSweepSummary, CacheTuneSummary, StudySummary, LoadBenchSummary,
                        ChurnBenchSummary, ProfileSummary, FusionTuneSummary)
}
#: summary keys that identify a kind when neither file names it
_SIGNATURES: tuple[tuple[RunKind, tuple[str, ...]], ...] = (
    (RunKind.RAG_STUDY, ("pareto_set", "objectives")),
    (RunKind.RERANK_SWEEP, ("chosen_depth", "curve")),
    (RunKind.FUSION_TUNE, ("candidates", "baselines", "chosen")),
    (RunKind.CACHE_TUNE, ("threshold", "curve", "max_false_hit")),
    (RunKind.BENCH_EMBED, ("best_setting", "max_abs_diff")),
    (RunKind.BENCH_FANOUT, ("modes", "speedup")),
    (RunKind.BENCH_LOAD, ("configs", "slo", "client")),
    (RunKind.BENCH_CHURN, ("configs", "runbook", "target_recall")),
    (RunKind.PROFILE, ("stages", "end_to_end", "tail")),
    (RunKind.SWEEP, ("builds", "backends", "pareto")),
    (RunKind.EVAL, ("rows", "dataset")),
)


@dataclass(frozen=True)
class Run:
    """A run directory read once: its summary (plain and typed), manifest and kind."""

    path: Path
    kind: RunKind
    summary: dict[str, Any]  # plain data, as summary.json holds it
    model: RunSummary  # the same summary through its kind's model (SUMMARY_MODELS)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.summary.get("run_id") or self.manifest.get("run_id") or self.path.name)

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def table(self, name: str) -> Any:
        """A parquet table of the run as a DataFrame, or None when the run has none."""
        import pandas as pd

        p = self.path / name
        return pd.read_parquet(p) if p.is_file() else None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise DataError(f"run file '{path}' cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DataError(f"run file '{path}' must hold a JSON object; received "
                        f"{type(data).__name__}")
    return data


def detect_kind(summary: Mapping[str, Any], manifest: Mapping[str, Any]) -> RunKind | None:
    for source in (manifest.get("kind"), summary.get("kind")):
        kind = RunKind.parse(source)
        if kind is not None:
            return kind
    for kind, keys in _SIGNATURES:
        if all(k in summary for k in keys):
            return kind
    return None


def load_run(path: str | Path) -> Run:
    """Read a run directory; DataError if it is not one, or holds a kind rwb cannot render."""
    p = Path(path)
    if p.is_file():
        raise DataError(f"'{p}' is a file, not a run directory: rwb report takes the folder a "
                        f"run wrote (the one holding its summary.json and manifest.json)")
    if not p.is_dir():
        raise DataError(f"run directory '{p}' does not exist")
    summary = _read_json(p / "summary.json")
    manifest = _read_json(p / "manifest.json")
    if not summary:
        raise DataError(f"'{p}' is not an rwb run directory: no summary.json (a run still in "
                        f"progress, or the wrong folder)")
    kind = detect_kind(summary, manifest)
    if kind is None:
        raise DataError(
            f"run '{p}': cannot tell what kind of run it is (manifest kind "
            f"{manifest.get('kind')!r}); known kinds: {', '.join(KINDS)}"
        )
    return Run(p, kind, summary, typed_summary(p, kind, summary), manifest)


def typed_summary(path: Path, kind: RunKind, summary: Mapping[str, Any]) -> RunSummary:
    """``summary`` read through ``kind``'s model; DataError naming the run when it does not fit."""
    model = SUMMARY_MODELS[kind]
    try:
        return model.model_validate(dict(summary))
    except ValidationError as exc:
        where = f"run '{path}': summary.json ({kind} summary)"
        raise DataError(str(format_validation_error(exc, model, where=where))) from None


__all__ = ["KINDS", "SUMMARY_MODELS", "Run", "detect_kind", "load_run", "typed_summary"]
