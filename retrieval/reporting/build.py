"""``rwb report RUN``: the figures and tables a run deserves, written as PNG files and one
self-contained HTML page. What a run holds is drawn by its kind's renderer (one module per kind
and workload shape in :mod:`retrieval.reporting.kinds`, registered with
:mod:`retrieval.reporting.registry`); this module keeps what every kind shares: the page."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from retrieval.errors import ConfigError, param_error
from retrieval.redact import redact_text
from retrieval.reporting.common import scalar_table, summary_table
from retrieval.reporting.html import Section, Table, render
from retrieval.reporting.kinds.index import (
    chosen_points,
    index_points,
    index_table,
    surface_axes,
    sweep_knobs,
    timed,
    with_chosen_timing,
)
from retrieval.reporting.load import Run, load_run, typed_summary
from retrieval.reporting.registry import Figures, figures_of, tables_of
from retrieval.reporting.style import png_bytes
from retrieval.runs import RunKind, write_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportResult:
    html: Path
    pngs: list[Path]
    kind: RunKind


def figures_for(run: Run, *, remeasure: bool = False) -> Figures:
    """The figures of ``run``, drawn by its kind's renderer (for its workload shape)."""
    return figures_of(run, remeasure=remeasure)


def tables_for(run: Run) -> list[tuple[str, Table]]:
    """The tables of ``run`` by its kind's renderer; a kind without one: its summary scalars."""
    tables = tables_of(run)
    return tables if tables is not None else [("Summary", summary_table(run.summary, "curve"))]


def write_report(
    run_path: str | Path,
    out: str | Path | None = None,
    *,
    remeasure: bool = False,
    target: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> ReportResult:
    """Render ``run_path`` into ``out`` (default ``RUN/report.html``) and PNGs beside it
    (``<stem>_<figure>.png``). ``target`` (recall@k in (0, 1]) draws a target and picks the
    chosen points of an eval run that has none. Returns the paths written."""
    run = load_run(run_path)
    if target is not None:
        if not 0.0 < target <= 1.0:
            raise param_error("--target-recall", "in (0, 1]", target)
        if not run.model.RETARGETS:
            raise ConfigError(f"--target-recall applies to eval runs only (a sweep keeps the "
                              f"target it was tuned for); '{run.path}' is a {run.kind} run")
        summary = {**run.summary, "target_recall": target}
        run = replace(run, summary=summary, model=typed_summary(run.path, run.kind, summary))
    html_path = Path(out) if out else run.path / "report.html"
    if html_path.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"--out must name an .html file; received '{html_path}'")
    try:
        html_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out: cannot create '{html_path.parent}' ({exc.strerror})") from None
    sections: list[Section] = []
    pngs: list[Path] = []
    for name, title, fig, caption in figures_for(run, remeasure=remeasure):
        if progress:
            progress(name)
        png = png_bytes(fig)
        path = html_path.parent / f"{html_path.stem}_{name}.png"
        write_atomic(path, png)
        pngs.append(path)
        sections.append(Section(name, title, png, caption))
    meta = [f"run {run.run_id} ({run.kind}) at {run.path}"]
    m = run.manifest
    if m:
        cpu = (m.get("cpu") or {}).get("model")
        git = (m.get("git") or {}).get("sha")
        meta.append(f"rwb {m.get('rwb_version')}, created {m.get('created')}, git {git}, "
                    f"CPU {cpu}, threads {m.get('threads')}")
    page = render(title=f"rwb report: {run.run_id}", meta=meta, sections=sections,
                  tables=tables_for(run), manifest=m)
    write_atomic(html_path, redact_text(page, secrets=[]))  # no URL password (old manifests)
    return ReportResult(html_path, pngs, run.kind)


__all__ = [
    "ReportResult",
    "chosen_points",
    "figures_for",
    "index_points",
    "index_table",
    "scalar_table",
    "surface_axes",
    "sweep_knobs",
    "tables_for",
    "timed",
    "with_chosen_timing",
    "write_report",
]
