"""``rwb profile``: the public verb (the CLI calls it). The module is not named ``profile``, so
that ``retrieval.api.profile`` (and ``retrieval.profile``) is the verb itself."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfileRun:
    """A profile's run directory, its summary (summary.json) and, with ``compare``, the
    production-vs-lab table."""

    path: Path
    summary: dict[str, Any]
    compare: dict[str, Any] | None = None
    figures: tuple[Path, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary, "run_dir": str(self.path),
                **({"compare": self.compare} if self.compare is not None else {})}


def profile(spec: Any, *, out: str | Path | None = None, queries: str | Path | None = None,
            otlp_dir: str | Path | None = None, remedies: bool = False,
            compare: str | Path | None = None, force: bool = False,
            plots: bool = True, progress: Any = None) -> ProfileRun:
    """Profile a retrieval pipeline (a spec path, mapping or :class:`ProfileSpec`): per-stage
    percentiles, shares, tail attribution, quality, traces (``otlp_dir`` and/or
    ``$OTEL_EXPORTER_OTLP_ENDPOINT``), the remedy waterfall (``remedies``) and production
    traces compared stage by stage (``compare``: OTLP JSON file or folder)."""
    from retrieval.api.verbs import _spec
    from retrieval.profiling.run import run_profile, write_profile_run
    from retrieval.profiling.spec import ProfileSpec, load_profile_spec, parse_profile_spec
    from retrieval.profiling.stats import compare as compare_stages
    from retrieval.profiling.trace import read_otlp_spans

    s = _spec(spec, ProfileSpec, parse_profile_spec, load_profile_spec, "pipeline spec")
    prod = read_otlp_spans(compare) if compare is not None else None  # bad input: before work
    from retrieval.otel import check_otlp_dir

    check_otlp_dir(otlp_dir)  # a file, a missing parent, read-only: refused before the work
    result = run_profile(s, queries_file=queries, remedies=remedies, progress=progress,
                         otlp_dir=Path(otlp_dir) if otlp_dir is not None else None)
    cmp = None
    if prod is not None:
        cmp = compare_stages(prod, result.summary["stages"], s.span_names)
        result.summary["compare"] = cmp
    run = write_profile_run(s, result, out, force=force)
    figs: list[Path] = []
    if plots:
        figs = _figures(run, result.summary)
    return ProfileRun(run.path, result.summary, cmp, tuple(figs))


def _figures(run: Any, summary: dict[str, Any]) -> list[Path]:
    try:
        from retrieval.reporting.profile import (
            slow_trace_spans,
            stage_bars,
            trace_timeline,
            waterfall_plot,
        )
    except ImportError:  # matplotlib is optional (the report extra)
        return []
    figs = [stage_bars(summary["stages"], run.file("stages.png"))]
    if summary.get("remedies"):
        figs.append(waterfall_plot(summary["remedies"], run.file("waterfall.png")))
    if (summary.get("tail") or {}).get("requests"):
        rows, title = slow_trace_spans(summary, run.read_table("spans.parquet"))
        if rows:
            figs.append(trace_timeline(rows, run.file("slow_trace.png"), title))
    return figs


__all__ = ["ProfileRun", "profile"]
