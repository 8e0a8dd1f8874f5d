"""Typed results of the public verbs (:mod:`retrieval.api.verbs`): frozen dataclasses holding the
run directory and the run's typed summary (the same models ``summary.json`` is written and read
through), each with ``to_frame()`` (a pandas DataFrame of the run's main table) and
``to_dict()`` (the plain data). pandas and the report layer are imported when used."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from retrieval.bench.summary import EmbedBenchSummary, FanoutBenchSummary, LoadBenchSummary
    from retrieval.cache.summary import CacheTuneSummary
    from retrieval.churn.summary import ChurnBenchSummary
    from retrieval.fusion_tune.summary import FusionTuneSummary
    from retrieval.live.summary import LiveSweepSummary
    from retrieval.profiling.summary import ProfileSummary
    from retrieval.reporting.load import Run
    from retrieval.rerank.summary import RerankSweepSummary
    from retrieval.runs import RunKind, RunSummary
    from retrieval.study.summary import StudySummary
    from retrieval.tune.summary import EvalSummary, SweepSummary


def _frame(rows: Sequence[Mapping[str, Any]] | None) -> pd.DataFrame:
    """Rows as the run's parquet tables hold them: nested dicts as dotted columns
    (``build.nlist``), integers that some rows lack as nullable ``Int64``, booleans as
    ``boolean`` (:func:`retrieval.runs.tables.typed_frame`)."""
    from retrieval.runs.tables import flatten, typed_frame

    return typed_frame([flatten(dict(r)) for r in rows or []])


_flat = _frame


@dataclass(frozen=True)
class RunResult:
    """A run rwb wrote: its directory (None for a run not written) and its typed summary."""

    path: Path | None
    summary: RunSummary

    @property
    def kind(self) -> RunKind:
        return self.summary.KIND

    @property
    def run_id(self) -> str | None:
        rid = getattr(self.summary, "run_id", None)
        return str(rid) if rid else (self.path.name if self.path else None)

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain data (what ``summary.json`` holds)."""
        return self.summary.to_json_dict()

    #: the parquet file ``to_frame()`` returns when the run was written (None: built from the
    #: summary's rows through the same table writer)
    TABLE: ClassVar[str | None] = None

    def to_frame(self) -> pd.DataFrame:
        """The run's main table with the parquet file's typed columns (the file itself when the
        run was written, without its constant ``run_id`` column)."""
        if self.TABLE and self.path is not None and (self.path / self.TABLE).is_file():
            import pandas as pd

            frame = pd.read_parquet(self.path / self.TABLE)
            return frame.drop(columns=["run_id"], errors="ignore")
        return _frame(self._rows())

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        raise NotImplementedError

    def _run(self) -> Run:
        from retrieval.errors import ConfigError
        from retrieval.reporting.load import load_run

        if self.path is None:
            raise ConfigError(f"this {self.kind} run was not written to a directory")
        return load_run(self.path)


@dataclass(frozen=True)
class IndexRun(RunResult):
    """An ``rwb eval`` or ``rwb sweep`` run of index configs."""

    def points(self) -> list[dict[str, Any]]:
        """Every measured config (plot input of :mod:`retrieval.api.plots`)."""
        from retrieval.reporting.kinds.index import index_points

        return index_points(self._run())

    def chosen(self) -> list[dict[str, Any]]:
        """Per backend: a sweep's choice, or for an eval run the cheapest point meeting its
        target (point estimate)."""
        from retrieval.reporting.kinds.index import chosen_points

        return chosen_points(self._run())

    def cheapest_meeting(self, target: float, cost: str = "p95_ms", *,
                         per_build: bool = False) -> list[dict[str, Any]]:
        """Per label (``per_build``: per label and build config, with a ``series`` key), the
        lowest-``cost`` measured point whose mean recall >= ``target`` (point estimate)."""
        from retrieval.reporting.points import cheapest_meeting

        points = self.points()
        if not per_build:
            return cheapest_meeting(points, target, cost)
        series: dict[str, list[dict[str, Any]]] = {}
        for p in points:
            name = f"{p.get('label') or p.get('backend')} {p.get('build')}"
            series.setdefault(name, []).append(p)
        return [{**best, "series": name} for name, group in series.items()
                for best in cheapest_meeting(group, target, cost)]

    def per_query_recall(self, point: Mapping[str, Any], *, remeasure: bool = False
                         ) -> np.ndarray | None:
        """Per-query recall@k of ``point`` (stored by eval runs; ``remeasure`` rebuilds it from
        the run's spec and dataset otherwise)."""
        from retrieval.reporting.perquery import per_query_recall

        return per_query_recall(self._run(), point, remeasure=remeasure)

    def table(self, name: str) -> pd.DataFrame | None:
        """A parquet table of the run (``measurements.parquet``, ``per_query.parquet``, ...)."""
        return self._run().table(name)


@dataclass(frozen=True)
class EvalRun(IndexRun):
    """``to_frame()``: one row per measured config (recall, latency percentiles in ms, QPS,
    ``build.*`` / ``search.*`` params) with the column types of ``measurements.parquet``
    (which holds one row per config x timing mode)."""

    summary: EvalSummary

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        return self.summary.rows


@dataclass(frozen=True)
class SweepRun(IndexRun):
    """``to_frame()``: one row per measured trial, as ``trials.parquet``."""

    summary: SweepSummary
    TABLE: ClassVar[str | None] = "trials.parquet"

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        return self.summary.rows

    def choices(self) -> pd.DataFrame:
        """One row per index entry: its chosen config (or none) and the held-out check."""
        rows = []
        for label, b in self.summary.backends.items():
            chosen = b.chosen.to_json_dict() if b.chosen is not None else {}
            rows.append({"label": label, "backend": b.backend, **chosen,
                         "heldout_recall": b.heldout_recall, "heldout_meets": b.heldout_meets,
                         "evaluations": b.evaluations})
        return _frame(rows)


@dataclass(frozen=True)
class LiveSweepRun(RunResult):
    """A live collection tuned in place (``rwb sweep`` of a spec with ``live:``);
    ``to_frame()``: one row per measured knob value (``probes.parquet``)."""

    summary: LiveSweepSummary
    TABLE: ClassVar[str | None] = "probes.parquet"

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        return self.to_dict().get("probes") or []


@dataclass(frozen=True)
class StudyRun(RunResult):
    summary: StudySummary

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        """The Pareto set (tuning split), nested metrics as dotted columns."""
        return self.to_dict().get("pareto_set") or []


@dataclass(frozen=True)
class FusionRun(RunResult):
    """``rwb tune fusion``: ``to_frame()`` has one row per fusion candidate (dev / test)."""

    summary: FusionTuneSummary
    TABLE: ClassVar[str | None] = "candidates.parquet"

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        return self.to_dict().get("candidates") or []


@dataclass(frozen=True)
class RerankRun(RunResult):
    summary: RerankSweepSummary

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        """One row per rerank depth (tuning / held-out / all metrics, latency) as dotted
        columns (``curve.parquet`` holds the same metrics one row per depth x split)."""
        return self.to_dict().get("curve") or []


@dataclass(frozen=True)
class CacheRun(RunResult):
    """``to_frame()``: the threshold curve, one row per threshold x split (``curve.parquet``)."""

    summary: CacheTuneSummary
    TABLE: ClassVar[str | None] = "curve.parquet"

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        return self.to_dict().get("curve") or []


@dataclass(frozen=True)
class ProfileRunResult(RunResult):
    """An ``rwb profile`` run; ``to_frame()``: every span's duration (``spans.parquet``), or
    without the run directory the per-stage percentiles."""

    summary: ProfileSummary
    TABLE: ClassVar[str | None] = "spans.parquet"

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        return self.to_dict().get("stages") or []


@dataclass(frozen=True)
class BenchRun(RunResult):
    summary: EmbedBenchSummary | FanoutBenchSummary | LoadBenchSummary | ChurnBenchSummary
    rows: tuple[dict[str, Any], ...] = ()
    #: the bench's own result object (summary as measured, agreement check, ``partial``): what
    #: ``rwb bench`` prints from; None for a run opened from its directory
    outcome: Any = field(default=None, compare=False, repr=False)

    def _rows(self) -> Sequence[Mapping[str, Any]]:
        """One row per measured setting (embed) or per mode x query (fan-out)."""
        return self.rows or self.to_dict().get("rows") or []


def result_class(model: type[RunSummary]) -> type[RunResult]:
    """The result class of runs whose summary is a ``model``: the most derived
    :class:`RunResult` whose ``summary`` field names that model (its annotation is its
    registration); :class:`RunResult` itself for a kind without a class of its own."""
    found: type[RunResult] = RunResult
    todo = list(RunResult.__subclasses__())
    while todo:
        cls = todo.pop(0)
        todo.extend(cls.__subclasses__())
        names = str(inspect.get_annotations(cls).get("summary", "")).split("|")
        if model.__name__ in (n.strip() for n in names) and issubclass(cls, found):
            found = cls
    return found


@dataclass(frozen=True)
class ExportedConfig:
    """A config file written by :func:`retrieval.export`."""

    path: Path
    engine: str
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.info)

    def to_frame(self) -> pd.DataFrame:
        """One row: what was exported (engine, backend, label, file), nested as dotted keys."""
        return _flat([{"engine": self.engine, **self.info, "path": str(self.path)}])


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`retrieval.verify`: ``holds`` and what was compared."""

    path: Path
    holds: bool
    info: dict[str, Any] = field(default_factory=dict)
    #: the full report (``retrieval.exporting`` VerifyReport, ChecksReport, NotMeasurable or a
    #: transfer report): what ``rwb verify`` prints from
    report: Any = field(default=None, compare=False, repr=False)

    @property
    def exit_code(self) -> int:
        """``rwb verify``'s exit status: 0 holds, 1 fails, 3 an engine rwb cannot run."""
        code = getattr(self.report, "exit_code", None)
        return int(code) if code is not None else (0 if self.holds else 1)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.info)

    def to_frame(self) -> pd.DataFrame:
        """One row per named check (cache, rerank exports), else one row of the re-measured
        and recorded values (ANN exports), nested as dotted columns."""
        checks = self.info.get("checks")
        if isinstance(checks, list):
            return _flat(checks)
        return _flat([self.info])


@dataclass(frozen=True)
class Report:
    """The files :func:`retrieval.report` wrote."""

    html: Path
    pngs: tuple[Path, ...]
    kind: str

    def to_frame(self) -> pd.DataFrame:
        """One row per file written (the HTML page, then each PNG)."""
        files = [("html", self.html), *(("png", p) for p in self.pngs)]
        return _frame([{"kind": self.kind, "type": t, "path": str(p)} for t, p in files])


__all__ = [
    "BenchRun",
    "CacheRun",
    "EvalRun",
    "ExportedConfig",
    "FusionRun",
    "IndexRun",
    "Report",
    "RerankRun",
    "RunResult",
    "StudyRun",
    "SweepRun",
    "Verification",
]
