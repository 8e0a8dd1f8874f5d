"""The run directory of a live sweep (``rwb sweep LIVE-SPEC --out DIR``): ``spec.yaml`` (the spec
as given, secrets masked), ``manifest.json`` (kind ``live-sweep``), ``summary.json``
(:class:`LiveSweepSummary`), ``probes.parquet`` (one row per measured knob value) and, with lab
queries, ``query_shift.parquet`` (one row per production query: per-query knob, OOD score)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from retrieval.live.spec import LiveSweepSpec
from retrieval.live.summary import LiveSweepSummary
from retrieval.runs import RunDir

log = logging.getLogger(__name__)


def spec_record(spec: LiveSweepSpec) -> dict[str, Any]:
    """The spec as plain data with query paths made absolute (verify re-reads them from
    anywhere); ``${NAME}`` kept unexpanded, so no secret is written."""
    from retrieval.live.queries import resolve

    data = spec.model_dump(mode="json", exclude_none=True)
    base = Path(spec.source).parent if spec.source not in ("<memory>", "") else None
    for key in ("queries", "lab_queries"):
        q = data.get(key)
        if isinstance(q, dict):
            for f in ("log", "otlp"):
                if q.get(f):
                    q[f] = str(resolve(q[f], base).resolve())
    if data.get("lab_topology"):
        data["lab_topology"] = str(resolve(data["lab_topology"], base).resolve())
    return data


def run_live_sweep(spec: LiveSweepSpec, out: Path | str | None, *,
                   force: bool = False) -> tuple[RunDir, LiveSweepSummary]:
    """Sweep the live collection of ``spec`` into a run directory. Attach and every check
    come first: a refusal (exit 2) or an unreachable server (exit 3) leaves no run behind."""
    from retrieval.live import attach
    from retrieval.live.tune import prepare, run_live

    col = attach(spec.live, spec.source)
    extra: list[Any] = []
    try:
        prep = prepare(spec, col)
        extra = [attach(spec.live, spec.source) for _ in range(spec.budget.concurrency - 1)]
        run = RunDir.create(out, spec.name, force=force)
        with run.recording():
            run.write_yaml("spec.yaml", spec_record(spec))
            run.write_manifest(kind=str(LiveSweepSummary.KIND), spec_source=spec.source,
                               seed=spec.seed)
            doc = run_live(spec, col, prep, run.work_dir(), extra)
            shift = (doc.get("live") or {}).get("query_shift")
            if shift and shift.get("per_query"):
                run.write_table("query_shift.parquet", shift.pop("per_query"))
                shift["per_query_file"] = "query_shift.parquet"
            if doc.get("probes"):
                run.write_table("probes.parquet", doc["probes"])
            summary = LiveSweepSummary.model_validate({**doc, "run_id": run.run_id})
            run.write_summary(summary)
            run.record_threads()
            if spec.ground_truth.dir is None:
                run.remove_work()  # the snapshot was scratch: its fingerprint is in the summary
    finally:
        for handle in (col, *extra):
            handle.close()
    return run, summary


__all__ = ["LiveSweepSummary", "run_live_sweep", "spec_record"]
