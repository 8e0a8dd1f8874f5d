"""The report of ``rwb profile`` (``profile``): per-stage latency, the remedy waterfall, the
slowest request's trace, and the stage, tail, load and remedy tables."""

from __future__ import annotations

from retrieval.profiling.summary import ProfileSummary
from retrieval.reporting.common import scalar_table
from retrieval.reporting.html import Table
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables


@renders_figures(ProfileSummary.KIND)
def profile_figures(run: Run, remeasure: bool) -> Figures:
    from retrieval.reporting import profile as pf

    s = run.summary
    bars = pf.stages_figure(s.get("stages") or [])
    figs: Figures = [("profile_stages", "Per-stage latency", bars,
                      "Each top-level stage's own P50 / P95 / P99 (ms) stacked; the black mark is "
                      "the end-to-end percentile (the stack is an upper bound of it).")]
    if s.get("remedies"):
        figs.append(("profile_waterfall", "Remedy waterfall", pf.waterfall_figure(s["remedies"]),
                     "P50 / P95 / P99 after each applied remedy, cumulative, each measured on "
                     "the same queries; quality on the right axis."))
    rows, title = pf.slow_trace_spans(s, run.table("spans.parquet"))
    if rows:
        figs.append(("profile_slow_trace", "Slowest request", pf.timeline_figure(rows, title),
                     "The spans of the slowest request of the tail, from its start (ms)."))
    return figs


@renders_tables(ProfileSummary.KIND)
def profile_tables(run: Run) -> Tables:
    s = run.summary
    cols = ["name", "n", "p50_ms", "p95_ms", "p99_ms"]
    stages = s.get("stages") or []
    rows = [[r.get(c) for c in cols] + [(r.get("shares") or {}).get("p95"),
                                         (r.get("shares") or {}).get("p99")] for r in stages]
    out = [("Stages", Table([*cols, "share_p95", "share_p99"], rows,
                            caption="per stage, ms; shares of the end-to-end percentiles "
                                    "(critical path, parallel stages counted once)"))]
    tail = s.get("tail") or {}
    if tail.get("by_stage"):
        out.append(("Tail attribution", Table(["stage", "slow requests"],
                                              [[k, v] for k, v in tail["by_stage"].items()],
                                              caption=f"the slowest {tail.get('n')} request(s)")))
    if s.get("load"):
        lc = ["rate_qps", "requests", "achieved_qps", "p50_ms", "p95_ms", "p99_ms",
              "p99_ms_uncorrected"]
        out.append(("Open loop", Table(lc, [[r.get(c) for c in lc] for r in s["load"]],
                                       caption="percentiles corrected for coordinated omission "
                                               "(from the intended send time), ms")))
    rem = s.get("remedies") or {}
    if rem.get("steps"):
        rc = ["step", "applied", "p50_ms", "p95_ms", "p99_ms", "p95_saved_ms", "what"]
        best = rem.get("best")
        out.append(("Remedies", Table(rc, [[r.get(c) for c in rc] for r in rem["steps"]],
                                      [r.get("step") == best for r in rem["steps"]],
                                      caption="cumulative, each measured; best return "
                                              "highlighted")))
    keep = ("name", "queries", "mode", "k", "end_to_end", "overhead", "quality", "cache")
    out.append(("Summary", scalar_table({k: s[k] for k in keep if k in s})))
    return out
