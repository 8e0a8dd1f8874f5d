"""A real collection's segment count against a lab topology run (issue 31, item 2).

A topology run (``rwb sweep`` of a spec with ``topology:``) measured the knob at the segment
counts it built. A collection in production (attached live, or the one an export is for) has
its own count (``describe().segments``: Milvus segments, LanceDB fragments, pgvector
partitions, Qdrant segments). :func:`knob_for_segments` gives, per index entry and build of the
run, the knob for that count: measured there when the lab built that count, else the run's
per-segment rule (knob as a function of the segment size ``N / segments``), and a warning when
the count is not among the lab's.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError, RwbError
from retrieval.runs import RunDir
from retrieval.tune import scale as sc
from retrieval.tune.kinds.topology import KIND as TOPOLOGY
from retrieval.tune.summary import SweepSummary
from retrieval.tune.topology import compare_segments
from retrieval.tune.workloads import require_workload

log = logging.getLogger(__name__)


def read_topology_run(path: Path | str, field: str) -> dict[str, Any]:
    """The summary of a topology run (a run folder); ConfigError naming ``field`` otherwise."""
    try:
        run = RunDir.open(path)
        summary = run.read_summary(SweepSummary).to_json_dict()
    except (RwbError, OSError, ValueError) as exc:
        raise ConfigError(f"field '{field}': '{path}' is not a readable rwb run folder "
                          f"({exc})") from None
    require_workload(summary, TOPOLOGY, field, path)
    return summary


def _rule_knob(row: dict[str, Any], n: int, segments: int) -> int | None:
    rule = row.get("rule")
    if not rule or row.get("range") is None:
        return None
    f = sc.Fit(rule["model"], float(rule["a"]), float(rule["b"]))
    low, high = row["range"]
    return int(min(max(math.ceil(f.predict(max(n / segments, 1.0)) - 1e-9), low), high))


def knob_for_segments(summary: dict[str, Any], segments: int | None,
                      where: str) -> dict[str, Any]:
    """Compare ``segments`` (the collection's own count; None: the engine does not report one)
    with the lab run's counts: ``collection_segments``, ``lab_segments``, ``warning`` (None
    when the count is among the lab's or unknown) and ``knobs``: per label x build the knob for
    that count (``source``: ``measured`` | ``rule`` | None)."""
    rows = list(summary.get("topology") or [])
    info = summary.get("topology_info") or {}
    lab = sorted({int(r["segments"]) for r in rows})
    n = int(info.get("n") or 0)
    warning = compare_segments(lab, segments, where) if segments is not None else None
    knobs: list[dict[str, Any]] = []
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(repr((r.get("label"), r.get("build"))), []).append(r)
    for group in groups.values():
        first = group[0]
        at = next((r for r in group if r["segments"] == segments), None)
        entry = {"label": first.get("label"), "backend": first.get("backend"),
                 "build": first.get("build"), "knob_name": first.get("knob_name"),
                 "knob": None, "source": None, "recall_lower": None}
        if segments is None:
            pass
        elif at is not None and at.get("knob") is not None:
            entry.update(knob=at["knob"], source="measured", recall_lower=at.get("recall_lower"))
        elif n:
            v = _rule_knob(first, n, segments)
            entry.update(knob=v, source=None if v is None else "rule")
        knobs.append(entry)
    return {"collection_segments": segments, "lab_segments": lab, "warning": warning,
            "knobs": knobs, "lab_run": summary.get("run_id")}


__all__ = ["knob_for_segments", "read_topology_run"]
