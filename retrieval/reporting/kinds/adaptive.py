"""The report's table of adaptive policies (a sweep's or ``rwb tune cache``'s ``adaptive``
entries): cost, quality and the tuned fixed setting at the same quality, with the verdict."""

from __future__ import annotations

from typing import Any

from retrieval.reporting.html import Table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Tables


def adaptive_table(entries: list[dict[str, Any]]) -> Table:
    """One row per policy; rows where the tuned fixed setting wins are highlighted."""
    rows, hl = [], []
    for e in entries:
        vs = e.get("vs_fixed") or {}
        rows.append([e.get("label"), e.get("policy"), e.get("cost_unit"), e.get("cost"),
                     e.get("mean"), e.get("p5"), e.get("p50_ms"), vs.get("knob"),
                     vs.get("value"), vs.get("cost"), vs.get("ratio"), vs.get("winner"),
                     e.get("skipped") or vs.get("verdict")])
        hl.append(vs.get("winner") == "fixed")
    return Table(["index", "policy", "cost unit", "cost", "mean", "p5", "p50 ms", "fixed knob",
                  "fixed value", "fixed cost", "ratio", "winner", "verdict"], rows, hl,
                 caption="Each policy on the held-out queries vs the tuned fixed setting that "
                         "reaches the same mean AND 5th-percentile quality on the same queries; "
                         "cost per query in its unit; ratio = policy cost / fixed cost (the "
                         "cache: hit-rate ratio); highlighted: the tuned fixed setting wins.")


def adaptive_section(run: Run) -> Tables:
    """The adaptive table as a section (none when the summary has no ``adaptive``)."""
    entries = run.summary.get("adaptive") or []
    return [("Adaptive policies vs the tuned fixed setting", adaptive_table(entries))] \
        if entries else []
