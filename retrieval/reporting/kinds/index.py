"""The report of index runs (``eval`` and ``sweep``, plain workload): recall against latency,
QPS and memory, the search knob, per-query recall, parameter surfaces, build costs; the measured
configs and, for a sweep, what its chosen configs export to. Also the parts the filtered and scale
renderers share (the summary head, the exports table)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval.errors import ConfigError
from retrieval.reporting import ann
from retrieval.reporting.common import scalar_table
from retrieval.reporting.exports import exports_table
from retrieval.reporting.html import Table
from retrieval.reporting.kinds.adaptive import adaptive_section
from retrieval.reporting.knob import recall_vs_knob
from retrieval.reporting.load import Run
from retrieval.reporting.perquery import per_query_recall
from retrieval.reporting.points import (
    cheapest_meeting,
    knob_curves,
    points_frame,
    series_names,
    timed,
)
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables
from retrieval.reporting.style import Colors, params_text
from retrieval.tune.pareto import front
from retrieval.tune.summary import EvalSummary, SweepSummary

log = logging.getLogger(__name__)


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
                    if isinstance(s, SweepSummary) else ""),
    )


def _exports(run: Run) -> Table | None:
    """The measured-or-translated table of a sweep's chosen configs (exports rwb can write)."""
    s = _index_summary(run)
    dim = int(((run.manifest or {}).get("dataset") or {}).get("dim") or 0)
    return exports_table(chosen_points(run), metric=str(s.metric), dim=dim, k=int(s.k or 10))


#: the summary scalars an index run's report opens with
HEAD_KEYS = ("run_id", "dataset", "metric", "k", "target_recall", "strategy", "objective",
             "recall_definition", "latency_unit", "cheapest_rule")


def head_table(run: Run) -> Table:
    """The summary scalars an index run's report opens with (:data:`HEAD_KEYS`)."""
    s = run.summary
    return scalar_table({k: s.get(k) for k in HEAD_KEYS if k in s})


def exports_section(run: Run) -> Tables:
    """The exports table of a sweep's chosen configs as a section (none when it is empty)."""
    exports = _exports(run)
    return [("Exports: measured or translated", exports)] if exports else []


@renders_figures(EvalSummary.KIND)
@renders_figures(SweepSummary.KIND)
def _index_figures(run: Run, remeasure: bool) -> Figures:
    return index_figures(run, remeasure=remeasure)


@renders_tables(EvalSummary.KIND)
def eval_tables(run: Run) -> Tables:
    return [("Summary", head_table(run)), ("Measured configs", index_table(run))]


def quality_table(run: Run) -> Table | None:
    """A quality target's comparison: per index entry, the recall knob and the nDCG knob with
    nDCG@10, the test's lower bound, distance computations per query and p50 ms."""
    s = _index_summary(run)
    qs = s.quality if isinstance(s, SweepSummary) else None
    if qs is None:
        return None
    rows: list[list[Any]] = []
    for label, q in qs.by_index.items():
        for role in ("recall", "quality"):
            p = q.get(role) or {}
            rows.append([label, f"knob_{role}", q.get(f"knob_{role}"), p.get("value"),
                         p.get("lower_bound"), p.get("non_inferior"),
                         p.get("distance_computations"), p.get("p50_ms"), q.get("agree")])
    return Table(["index", "choice", qs.knob or "knob", qs.metric or "metric", "diff lower bound",
                  "non-inferior", "distance computations / query", "p50 ms", "agree"], rows,
                 caption=f"{qs.metric} non-inferior to exact search ({_num(qs.exact)}) by "
                         f"{qs.margin}: {qs.test}, alpha {qs.alpha}")


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


@renders_tables(SweepSummary.KIND)
def sweep_tables(run: Run) -> Tables:
    quality = quality_table(run)
    return [*eval_tables(run), *([("Quality target", quality)] if quality else []),
            *exports_section(run), *adaptive_section(run)]


__all__ = [
    "chosen_points",
    "exports_section",
    "head_table",
    "index_figures",
    "index_points",
    "index_table",
    "surface_axes",
    "sweep_knobs",
    "timed",
    "with_chosen_timing",
]
