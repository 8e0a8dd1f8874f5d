"""``rwb report RUN``: the figures and tables a run deserves, chosen by what the run holds, written
as PNG files and one self-contained HTML page."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from matplotlib.figure import Figure

from retrieval.bench.summary import EmbedBenchSummary, FanoutBenchSummary
from retrieval.errors import ConfigError, param_error
from retrieval.redact import redact_text
from retrieval.reporting import ann, filtered, rag
from retrieval.reporting.bands import per_query_bands
from retrieval.reporting.exports import exports_table
from retrieval.reporting.html import Section, Table, render
from retrieval.reporting.knob import recall_vs_knob
from retrieval.reporting.load import Run, load_run, typed_summary
from retrieval.reporting.perquery import per_query_recall
from retrieval.reporting.points import (
    cheapest_meeting,
    knob_curves,
    points_frame,
    series_names,
    timed,
)
from retrieval.reporting.study import study_figures, study_tables
from retrieval.reporting.style import Colors, params_text, png_bytes
from retrieval.rerank.run import RerankSweepSummary
from retrieval.runs import WORKLOAD_FILTERED, RunKind, RunSummary, workload_kind, write_atomic
from retrieval.tune.pareto import front
from retrieval.tune.summary import EvalSummary, SweepSummary

log = logging.getLogger(__name__)

Figures = list[tuple[str, str, Figure, str]]  # (name, title, figure, caption)


@dataclass(frozen=True)
class ReportResult:
    html: Path
    pngs: list[Path]
    kind: RunKind


T = TypeVar("T", bound=RunSummary)


def _typed(run: Run, model: type[T]) -> T:
    """The run's typed summary, checked to be a ``model``."""
    if not isinstance(run.model, model):
        raise ConfigError(f"run '{run.path}' is a {run.kind} run, not a {model.KIND} run")
    return run.model


def _index_summary(run: Run) -> EvalSummary | SweepSummary:
    """The typed summary of an eval or sweep run."""
    if isinstance(run.model, EvalSummary | SweepSummary):
        return run.model
    raise ConfigError(f"run '{run.path}' is a {run.kind} run, not an eval or sweep run")


# --------------------------------------------------------------------------- index runs


def index_points(run: Run) -> list[dict[str, Any]]:
    """Measured configs of an eval or sweep run (sweep probe points have no p95), sorted by
    index entry (in the spec's order), build and knob value."""
    s = _index_summary(run)
    rows = [dict(r) for r in s.rows]
    labels = dict.fromkeys([*(s.backends if isinstance(s, SweepSummary) else {}),
                            *(str(r.get("label") or r.get("backend")) for r in rows)])
    order = {label: i for i, label in enumerate(labels)}
    return sorted(rows, key=lambda r: (order[str(r.get("label") or r.get("backend"))],
                                       _sortable(r.get("build")), _sortable(r.get("search"))))


def _sortable(params: Any) -> tuple[tuple[str, int, float, str], ...]:
    """A sort key of a param dict: numbers by value, anything else by its text."""
    if not isinstance(params, Mapping):
        return ()
    return tuple((str(k), 0, float(v), "") if isinstance(v, int | float)
                 and not isinstance(v, bool) else (str(k), 1, 0.0, str(v))
                 for k, v in sorted(params.items()))


def sweep_knobs(run: Run) -> dict[str, str]:
    """The knob a target sweep searched, per index entry (empty for other runs)."""
    s = _index_summary(run)
    if not isinstance(s, SweepSummary):
        return {}
    return {str(b.get("label")): str(b["knob"]) for b in s.builds
            if b.get("method") == "target" and b.get("knob")}


def with_chosen_timing(points: Sequence[Mapping[str, Any]],
                       chosen: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``points`` where a chosen config's point takes the chosen config's full single-query
    timing (a sweep's probe of that config has none), so it sits on the p95 axis."""
    by_key = {_key(c): c for c in chosen}
    out = []
    for p in points:
        c = by_key.get(_key(p))
        if c is not None and p.get("p95_ms") is None and c.get("p95_ms") is not None:
            p = {**p, **{f: c[f] for f in ("p50_ms", "p95_ms", "p99_ms") if f in c}}
        out.append(dict(p))
    return out


def chosen_points(run: Run) -> list[dict[str, Any]]:
    """A sweep's own choice per backend (confidence bound + held-out); for an eval run, the
    cheapest point whose mean recall meets the target (point estimate)."""
    s = _index_summary(run)
    if isinstance(s, SweepSummary):
        return [{**b.chosen.to_json_dict(), "backend": b.backend, "label": label}
                for label, b in s.backends.items() if b.chosen is not None]
    return cheapest_meeting(index_points(run), s.target_recall)


def surface_axes(points: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(label, rows, cols) parameter pairs worth a surface: per backend, two varying build
    params, or one varying build param against a varying search param."""
    frame = points_frame(list(points))
    if frame.empty:
        return []
    out = []
    key = "label" if "label" in frame else "backend"
    for label, g in frame.groupby(key):
        varying = [c for c in g.columns if c.startswith(("build.", "search."))
                   and g[c].nunique(dropna=True) > 1]
        builds = [c for c in varying if c.startswith("build.")]
        searches = [c for c in varying if c.startswith("search.")]
        if len(builds) >= 2:
            out.append((str(label), builds[0], builds[1]))
        if builds and searches:
            out.append((str(label), builds[0], searches[0]))
    return out


#: captions of a sweep's plots and table: what the points are and why a star may sit off its curve
STEPS_NOTE = ("Search steps of a sweep are one batch pass without single-query timing: they "
              "have no p95 and are shown by recall in the panel on the right.")
RETIMED_NOTE = ("A sweep's curve points are search steps, each one batch pass without warm-up; "
                "a chosen config (star) is timed again in full (warm-up, best of the spec's "
                "batch_repeats passes), so its QPS can differ from its own curve point.")


def pareto_keys(run: Run, points: Sequence[Mapping[str, Any]]) -> set[tuple[Any, str, str]]:
    """The configs on the recall/p95 Pareto front: a sweep's own front (both fronts it
    recorded), else the front of the measured points (recall vs single-query p95)."""
    s = _index_summary(run)
    front_points: list[Mapping[str, Any]]
    if isinstance(s, SweepSummary):
        front_points = list(s.pareto)
    else:
        timed_points = timed(points, "p95_ms")
        front_points = [timed_points[i] for i in front(timed_points, "p95_ms", False)]
    return {_key(p) for p in front_points}


def _key(p: Mapping[str, Any]) -> tuple[Any, str, str]:
    return (p.get("label") or p.get("backend"), repr(p.get("build")), repr(p.get("search")))


def index_figures(run: Run, *, remeasure: bool = False) -> Figures:
    s = _index_summary(run)
    k = int(s.k or 10)
    target = s.target_recall
    points = index_points(run)
    chosen = chosen_points(run)
    namer = series_names([*points, *chosen])
    colors = Colors(namer(p) for p in points)
    sweep = isinstance(s, SweepSummary)
    figs: Figures = [
        ("recall_vs_p95", f"Recall@{k} vs p95 latency",
         ann.recall_vs_latency(with_chosen_timing(points, chosen), k=k, target=target,
                               chosen=chosen, colors=colors),
         "Single-query p95 latency (ms) on a log x axis, recall@k on y; the black step line is "
         "the recall/p95 Pareto front across every backend and build."
         + (f" {STEPS_NOTE}" if sweep else "")),
        ("recall_vs_qps", f"QPS vs recall@{k}",
         ann.recall_vs_qps(points, k=k, target=target, chosen=chosen, colors=colors),
         "The ann-benchmarks plot: recall@k on x, batch-mode QPS on a log y axis."
         + (f" {RETIMED_NOTE}" if sweep else "")),
    ]
    if knob_curves(points, sweep_knobs(run)):
        figs.insert(0, ("recall_vs_knob", f"Recall@{k} vs the search knob",
                        recall_vs_knob(points, k=k, target=target, chosen=chosen,
                                       knobs=sweep_knobs(run), colors=colors),
                        "Every measured point per index entry: recall@k (mean over the "
                        "tuning queries) against the knob value, the band down to its lower "
                        "confidence bound, the target line and the chosen value (star)."))
    if any(p.get("bytes_per_vector") is not None for p in points):
        figs.append(("recall_vs_bytes", f"Recall@{k} vs bytes per vector",
                     ann.recall_vs_bytes(points, k=k, target=target, chosen=chosen,
                                         colors=colors),
                     "Measured resident bytes per vector (retrieval.memory: RSS of the loaded "
                     "index in a clean process, or the engine's own figure) on a log x axis; "
                     "the dotted line is float32; stars: the chosen points."))
    if chosen:
        pick = min(chosen, key=lambda c: float(c.get("p95_ms") or float("inf")))
        values = per_query_recall(run, pick, remeasure=remeasure)
        where = f"{pick.get('label') or pick.get('backend')} {params_text(pick.get('search'))}"
        if values is not None:
            figs.append(("per_query_recall", f"Per-query recall@{k} at {where}",
                         ann.per_query_recall(values, k=k, target=target, config=where),
                         "The cheapest chosen config; a mean that meets the target can hide "
                         "queries far below it."))
        else:
            log.info("no per-query recall stored for %s; use --remeasure", where)
    for label, rows, cols in surface_axes(points):
        mine = [p for p in points if (p.get("label") or p.get("backend")) == label]
        name = re.sub(r"[^A-Za-z0-9]+", "_", f"surface_{label}_{rows}_{cols}").strip("_")
        figs.append((name, f"{label}: {rows} x {cols}",
                     ann.param_surface(mine, rows, cols, k=k, target=target,
                                       title=f"{label}: {rows.split('.')[-1]} x "
                                             f"{cols.split('.')[-1]}"),
                     "Build time and memory beside the recall and latency surfaces."))
    figs.append(("build_costs", "Build time and memory", ann.build_costs(points), ""))
    return figs


def index_table(run: Run) -> Table:
    s = _index_summary(run)
    points = index_points(run)
    chosen = {_key(c): c for c in chosen_points(run)}
    front_keys = pareto_keys(run, points)
    rows, hl = [], []
    for p in points:
        key = _key(p)
        # a chosen config shows its full re-timing (as the sweep's output and summary do)
        timed_as = {**p, **{f: chosen[key][f] for f in ("p95_ms", "qps")
                            if chosen.get(key, {}).get(f) is not None}}
        rows.append([
            p.get("label") or p.get("backend"), params_text(p.get("build")),
            params_text(p.get("search")), p.get("recall"), p.get("recall_lb"),
            timed_as.get("p95_ms"), timed_as.get("qps"), p.get("build_s"),
            None if p.get("memory_bytes") is None else float(p["memory_bytes"]) / 2**20,
            "yes" if key in front_keys else "", "yes" if key in chosen else "",
        ])
        hl.append(key in chosen)
    k = s.k or 10
    return Table(
        ["backend", "build", "search", f"recall@{k}", "recall lower bound", "p95 ms", "QPS",
         "build s", "memory MiB", "Pareto", "chosen"],
        rows, hl,
        caption="recall@k by id (mean over queries); p95: single-query latency (ms); QPS: batch "
                "mode; Pareto: on the recall/p95 front (a sweep: on either of its fronts); "
                "chosen rows highlighted, with their full re-timing (p95, QPS)." + (
                    f" Sweep probe rows have no latency. {RETIMED_NOTE}"
                                             if run.kind == RunKind.SWEEP else ""),
    )


# --------------------------------------------------------------------------- RAG runs


def scalar_table(summary: Mapping[str, Any], keys: Sequence[str] | None = None,
                 caption: str = "") -> Table:
    """Two columns (key, value) of the summary's scalars (nested dicts one level deep)."""
    rows: list[list[Any]] = []
    for key, v in summary.items():
        if keys is not None and key not in keys:
            continue
        if isinstance(v, str | int | float | bool) or v is None:
            rows.append([key, v])
        elif isinstance(v, Mapping) and all(
            isinstance(x, str | int | float | bool) or x is None for x in v.values()
        ):
            for sub, x in v.items():
                rows.append([f"{key}.{sub}", x])
    return Table(["key", "value"], rows, caption=caption)


def rag_figures(run: Run) -> Figures:
    s = run.summary
    if run.kind == RunKind.BENCH_EMBED:
        rows = _typed(run, EmbedBenchSummary).rows or _rows(run, "results.parquet")
        return [("embed_batch_sweep", "Embedding batch sweep", rag.embed_batch_sweep(rows, s),
                 "Throughput and per-call latency per batching setting.")]
    if run.kind == RunKind.BENCH_LOAD:
        from retrieval.reporting import loadcurves

        return [("load_qps_p99", "QPS vs p99 under load", loadcurves.qps_p99_curves(s),
                 "Open loop per config: corrected and uncorrected p99, SLO line, capacity."),
                ("load_closed", "Closed loop", loadcurves.closed_loop_curves(s),
                 "Clients vs achieved QPS and p99.")]
    if run.kind == RunKind.BENCH_CHURN:
        from retrieval.reporting.churn import recall_over_steps

        return [("churn_recall", "Recall under churn", recall_over_steps(s),
                 "Recall and its fresh-build control per search step, p99, maintenance "
                 "marked.")]
    if run.kind == RunKind.BENCH_FANOUT:
        return [("fanout_speedups", "Fan-out speedups", rag.fanout_speedups(s),
                 "Per-query latency of serial, thread-pool and asyncio fan-out.")]
    if run.kind == RunKind.RERANK_SWEEP:
        return [("rerank_depth", "Rerank-depth curve",
                 rag.rerank_depth_curve(s, bands=rerank_bands(run)),
                 "Quality from one scoring pass at the largest depth; latency from actual calls. "
                 "Shaded: 95% bootstrap interval of each split's mean over its queries (a few "
                 "dozen queries leave a wide one).")]
    if run.kind == RunKind.FUSION_TUNE:
        from retrieval.reporting.fusion import dev_vs_test

        return [("fusion_candidates", "Fusion candidates", dev_vs_test(s),
                 "Chosen on the dev split, judged on the test split with a paired "
                 "randomisation test; dashed: the baselines' test values.")]
    if run.kind == RunKind.CACHE_TUNE:
        return [("cache_curve", "Semantic-cache hit / false-hit curve", rag.cache_curve(s),
                 "Chosen threshold: largest whose upper bound on the tuning false-hit rate "
                 "meets the cap.")]
    if run.kind == RunKind.RAG_STUDY:
        return study_figures(s, _rows(run, "trials.parquet"), _rows(run, "grid.parquet"))
    if run.kind == RunKind.PROFILE:
        return _profile_figures(run)
    raise ConfigError(f"no figures for run kind '{run.kind}'")  # pragma: no cover


def rerank_bands(run: Run) -> dict[str, dict[int, tuple[float, float]]]:
    """Bootstrap intervals of the selection metric per split and depth of a rerank run, from
    its per_query.parquet and the spec's seeded split (empty when either is missing)."""
    from retrieval.rerank.tune import split_queries
    from retrieval.specfile import read_yaml

    r = _typed(run, RerankSweepSummary)
    rows = _rows(run, "per_query.parquet")
    spec_path = run.path / "spec.yaml"
    if not rows or not spec_path.is_file():
        return {}
    spec = read_yaml(spec_path)
    first = min(int(x["depth"]) for x in rows)
    ids = [str(x["query_id"]) for x in rows if int(x["depth"]) == first]  # the run's order
    try:
        tuning, heldout = split_queries(ids, float(spec.get("tuning_fraction", 0.5)),
                                        int(spec.get("seed", 0)))
    except ConfigError:
        return {}
    return per_query_bands(rows, r.selection_metric or "ndcg@10",
                           {"tuning": tuning, "heldout": heldout})
def _profile_figures(run: Run) -> Figures:
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


def _profile_tables(run: Run) -> list[tuple[str, Table]]:
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


def _rows(run: Run, name: str) -> list[dict[str, Any]]:
    t = run.table(name)
    if t is None:
        return []
    import pandas as pd

    # a missing value of a nullable int/bool column reads as NaN (as a float column's does)
    return [{k: float("nan") if v is pd.NA else v for k, v in r.items()}
            for r in t.to_dict("records")]


def _runtimes_table(rt: dict[str, Any]) -> Table:
    cols = ["runtime", "best_setting", "texts_per_s", "call_p50_ms", "call_p95_ms",
            "speedup_vs_library", "cos_dist_mean", "recall_at_k", "within_tolerance"]
    by = rt.get("by_runtime", {})
    rows = [[name, e.get("best_setting"), e.get("texts_per_s"), e.get("call_p50_ms"),
             e.get("call_p95_ms"), e.get("speedup_vs_library"),
             e.get("drift", {}).get("cos_dist_mean"), e.get("drift", {}).get("recall_at_k"),
             e.get("within_tolerance")] for name, e in by.items()]
    fastest = rt.get("fastest_within_tolerance", {}).get("runtime")
    return Table(cols, rows, [name == fastest for name in by],
                 caption=f"drift and speedups vs torch fp32 (speedup_vs_library: over "
                         f"encode(batch_size=32)); fastest within tolerance highlighted "
                         f"({rt.get('tolerance', {}).get('rule', '')})")


def rag_tables(run: Run) -> list[tuple[str, Table]]:
    s = run.summary
    if run.kind == RunKind.RAG_STUDY:
        return study_tables(s)
    if run.kind == RunKind.PROFILE:
        return _profile_tables(run)
    if run.kind == RunKind.BENCH_LOAD:
        from retrieval.reporting.loadcurves import load_tables

        return load_tables(s)
    if run.kind == RunKind.BENCH_CHURN:
        from retrieval.reporting.churn import churn_tables

        return [("Summary", scalar_table({k: v for k, v in s.items() if k != "configs"})),
                *churn_tables(s)]
    if run.kind == RunKind.BENCH_EMBED and _typed(run, EmbedBenchSummary).rows:
        e = _typed(run, EmbedBenchSummary)
        cols = ["setting", "mode", "batch_size", "token_budget", "texts_per_s", "tokens_per_s",
                "call_p50_ms", "call_p95_ms", "padding_waste", "speedup_vs_single"]
        rows = [[r.get(c) for c in cols] for r in e.rows]
        best = [r.get("setting") == e.best_setting for r in e.rows]
        out = [("Summary", scalar_table({k: v for k, v in s.items() if k != "rows"})),
               ("Settings", Table(cols, rows, best, caption="best setting highlighted; "
                                  "latency per call (ms), throughput per second"))]
        if e.runtimes:
            out.append(("Runtimes", _runtimes_table(e.runtimes)))
        return out
    if run.kind == RunKind.BENCH_FANOUT:
        modes = _typed(run, FanoutBenchSummary).modes
        cols = ["p50_ms", "p95_ms", "p99_ms", "qps", "speedup_p50", "cpu_cores",
                "child_cpu_cores"]
        rows = [[m, *[v.get(c) for c in cols]] for m, v in modes.items()]
        return [("Modes", Table(["mode", *cols], rows, caption="latency per query (ms)")),
                ("Summary", scalar_table({k: v for k, v in s.items() if k != "modes"}))]
    if run.kind == RunKind.FUSION_TUNE:
        from retrieval.reporting.fusion import fusion_tables

        return [*fusion_tables(s), ("Summary", scalar_table(
            {k: v for k, v in s.items() if k not in ("candidates", "baselines", "chosen")}))]
    if run.kind == RunKind.RERANK_SWEEP:
        r = _typed(run, RerankSweepSummary)
        metric = r.selection_metric or "ndcg@10"
        rows, hl = [], []
        for c in r.curve:
            rows.append([c.depth, c.tuning.get(metric), c.heldout.get(metric),
                         c.latency.get("p50_ms"), c.latency.get("p95_ms")])
            hl.append(c.depth == r.chosen_depth)
        return [("Depths", Table(["depth", f"{metric} tuning", f"{metric} held-out", "p50 ms",
                                  "p95 ms"], rows, hl, caption="chosen depth highlighted")),
                ("Summary", scalar_table({k: v for k, v in s.items() if k != "curve"}))]
    return [("Summary", scalar_table({k: v for k, v in s.items() if k != "curve"}))]


# --------------------------------------------------------------------------- the page


INDEX_KINDS = (RunKind.EVAL, RunKind.SWEEP)


def figures_for(run: Run, *, remeasure: bool = False) -> Figures:
    if run.kind == RunKind.SWEEP and "scale" in run.summary:  # a scale study
        from retrieval.reporting import scale

        return scale.figures(run.summary)
    if run.kind in INDEX_KINDS and workload_kind(run.summary) == WORKLOAD_FILTERED:
        return filtered.figures(run.summary)
    if run.kind in INDEX_KINDS:
        return index_figures(run, remeasure=remeasure)
    return rag_figures(run)


def tables_for(run: Run) -> list[tuple[str, Table]]:
    if run.kind in INDEX_KINDS:
        s = run.summary
        keys = ("run_id", "dataset", "metric", "k", "target_recall", "strategy", "objective",
                "recall_definition", "latency_unit", "cheapest_rule")
        head: dict[str, Any] = {k: s.get(k) for k in keys if k in s}
        if workload_kind(s) == WORKLOAD_FILTERED:
            return [("Summary", scalar_table(head)), *filtered.tables(s)]
        if "scale" in s:
            from retrieval.reporting import scale

            exports = _exports(run)
            return [("Summary", scalar_table(head)), *scale.tables(s),
                    *([("Exports: measured or translated", exports)] if exports else [])]
        tables = [("Summary", scalar_table(head)), ("Measured configs", index_table(run))]
        exports = _exports(run) if run.kind == RunKind.SWEEP else None
        return tables + ([("Exports: measured or translated", exports)] if exports else [])
    return rag_tables(run)


def _exports(run: Run) -> Table | None:
    """The measured-or-translated table of a sweep's chosen configs (exports rwb can write)."""
    s = _index_summary(run)
    dim = int(((run.manifest or {}).get("dataset") or {}).get("dim") or 0)
    return exports_table(chosen_points(run), metric=str(s.metric), dim=dim, k=int(s.k or 10))


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
        if run.kind != RunKind.EVAL:
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
    "surface_axes",
    "sweep_knobs",
    "tables_for",
    "timed",
    "with_chosen_timing",
    "write_report",
]
