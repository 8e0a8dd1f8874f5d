"""Tune a live collection in place: search-time knobs only (no build), on production queries,
under a budget (:mod:`retrieval.live.pace`), with the same target search
(:mod:`retrieval.tune.target`), recall lower bound (:func:`retrieval.tune.decide.lower_bound`)
and held-out split (:func:`retrieval.tune.decide.split_queries`) as any sweep.

Engine-agnostic: only the :class:`~retrieval.indexes.live.LiveCollection` protocol (and its
exact / snapshot capabilities for the ground truth) is used, so every engine's attach adapter
works through it unchanged.

Order of work: attach (errors before anything else) -> queries (dimension checked) -> exact
ground truth of every query (the engine's exact path or a snapshot) -> target search over the
knob on the tuning queries -> the chosen value on the held-out queries -> query shift when
``lab_queries`` are given. Every search on the collection is paced to ``budget.max_qps``; past
``budget.time_limit_s`` the sweep stops and reports what it measured (``budget_exhausted``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import ConfigError, param_error
from retrieval.groundtruth.exact import GroundTruth
from retrieval.indexes.live import LiveCollection, LiveDescription, LiveKnob
from retrieval.live.pace import BudgetExhausted, Pacer
from retrieval.live.queries import NOT_PRODUCTION, LiveQueries, load_queries
from retrieval.live.shift import auroc, ladder, ood_scores, per_query_knob
from retrieval.live.spec import LiveSweepSpec
from retrieval.live.truth import Snapshot, engine_truth, snapshot_truth
from retrieval.stats.metrics import latency_summary, recall_by_id
from retrieval.tune import target as tgt
from retrieval.tune.decide import lower_bound, split_queries
from retrieval.tune.topology_compare import knob_for_segments, read_topology_run

log = logging.getLogger(__name__)

EPS = 1e-9
RECALL_DEFINITION = "recall@k by id against the exact top-k of the live collection"


@dataclass
class LiveContext:
    """What one live sweep works with: the collection, its knob, the queries and their exact
    top-k, the pacer that spends the budget."""

    spec: LiveSweepSpec
    col: LiveCollection
    knob: LiveKnob
    low: int
    high: int
    pacer: Pacer
    queries: LiveQueries
    truth: GroundTruth
    snapshot: dict[str, Any] | None = None
    gt_seconds: float = 0.0
    probes: list[dict[str, Any]] = field(default_factory=list)
    #: more handles on the same collection (budget.concurrency > 1: one per extra worker)
    extra: list[LiveCollection] = field(default_factory=list)

    @property
    def handles(self) -> list[LiveCollection]:
        return [self.col, *self.extra]

    def set_params(self, params: dict[str, Any]) -> None:
        for h in self.handles:
            h.set_search_params(**params)


def pick_knob(spec: LiveSweepSpec, col: LiveCollection) -> tuple[LiveKnob, int, int]:
    """The knob to tune (``spec.knob`` or the collection's first) and its range."""
    knobs = col.knobs()
    if not knobs:
        d = col.describe()
        raise ConfigError(f"{spec.source}: the live collection {d.name} has no search-time knob "
                          f"to tune (index kind: {d.index_kind or 'none'})")
    names = [k.name for k in knobs]
    knob = knobs[0] if spec.knob is None else next((k for k in knobs if k.name == spec.knob),
                                                   None)
    if knob is None:
        raise param_error("knob", f"one of {', '.join(names)}", spec.knob, where=spec.source)
    low, high = spec.search_range or (knob.low, knob.high)
    if not knob.low <= low <= high <= knob.high:
        raise param_error("search_range", f"[low, high] within [{knob.low}, {knob.high}] "
                          f"({knob.native})", list(spec.search_range or ()), where=spec.source)
    return knob, int(low), int(high)


def ground_truth(ctx_spec: LiveSweepSpec, col: LiveCollection, vectors: np.ndarray,
                 pacer: Pacer, folder: Path, extra: list[LiveCollection] | None = None
                 ) -> tuple[GroundTruth, dict[str, Any] | None, float]:
    """Exact top-k of ``vectors`` by the spec's method; (truth, snapshot figures, seconds).
    ``extra``: more handles for the paced exact searches (concurrency)."""
    import time

    t0 = time.perf_counter()
    gts = ctx_spec.ground_truth
    if gts.method == "snapshot":
        snap = Snapshot(Path(gts.dir) if gts.dir else folder, col)
        info = snap.take(batch=gts.batch)
        return snapshot_truth(snap, vectors, ctx_spec.k), info.to_dict(), \
            time.perf_counter() - t0
    return engine_truth(col, vectors, ctx_spec.k, pacer, extra), None, \
        time.perf_counter() - t0


def measure(ctx: LiveContext, value: int, rows: np.ndarray, *, record: bool = True,
            what: str = "probe") -> dict[str, Any]:
    """The knob at ``value`` on the queries at ``rows``: recall (mean, lower bound), latency
    percentiles (ms, paced single queries)."""
    spec = ctx.spec
    params = {**spec.fixed, ctx.knob.name: int(value)}
    ctx.set_params(params)
    res, lat = ctx.pacer.run([h.search for h in ctx.handles], ctx.queries.vectors[rows], spec.k)
    per_q = recall_by_id(res.ids, ctx.truth.ids[rows], spec.k)
    lb = lower_bound(per_q, spec.k, spec.confidence, spec.seed)
    point = {"search": params, "recall": float(per_q.mean()), "recall_lb": float(lb),
             "n_queries": int(rows.size), "meets": bool(lb >= spec.target_recall - EPS),
             **{k: round(v, 4) for k, v in latency_summary(lat).items()
                if k in ("p50_ms", "p95_ms", "p99_ms")}, "kind": what}
    if record:
        ctx.probes.append(point)
    log.info("%s %s=%d: recall %.4f (lower bound %.4f) on %d queries", what, ctx.knob.name,
             value, point["recall"], lb, rows.size)
    return point


def target_search(ctx: LiveContext, rows: np.ndarray, what: str = "probe"
                  ) -> tuple[int | None, dict[int, dict[str, Any]]]:
    """The smallest knob value whose recall lower bound on ``rows`` meets the target."""
    seen: dict[int, dict[str, Any]] = {}

    def meets(v: int) -> bool:
        seen[v] = measure(ctx, v, rows, what=what)
        return bool(seen[v]["meets"])

    out = tgt.solve(ctx.low, ctx.high, meets)
    return out.value, seen


def query_shift(ctx: LiveContext, split_rows: np.ndarray, prod_knob: int | None,
                lab: LiveQueries, lab_truth: GroundTruth) -> dict[str, Any]:
    """Lab vs production knob (inflation factor), per-query knob and OOD score with its AUROC
    (definitions: :mod:`retrieval.live.shift`)."""
    spec, k = ctx.spec, ctx.spec.k
    lab_ctx = LiveContext(spec, ctx.col, ctx.knob, ctx.low, ctx.high, ctx.pacer, lab, lab_truth,
                          probes=ctx.probes, extra=ctx.extra)
    lab_knob, _ = target_search(lab_ctx, np.arange(lab.vectors.shape[0]), what="lab probe")
    values = ladder(ctx.low, ctx.high)
    recalls = []
    for v in values:
        ctx.set_params({**spec.fixed, ctx.knob.name: int(v)})
        res, _ = ctx.pacer.run([h.search for h in ctx.handles], ctx.queries.vectors, k)
        recalls.append(recall_by_id(res.ids, ctx.truth.ids, k))
    pq = per_query_knob(values, np.asarray(recalls), spec.target_recall)
    kth_ref = lab_truth.distances[:, k - 1]
    scores = ood_scores(ctx.truth.distances[:, k - 1], kth_ref[np.isfinite(kth_ref)])
    hard = np.array([lab_knob is None or v is None or v > 2 * lab_knob for v in pq])
    inflation = (prod_knob / lab_knob) if prod_knob and lab_knob else None
    return {
        "knob": ctx.knob.name, "lab_knob": lab_knob, "production_knob": prod_knob,
        "inflation_factor": None if inflation is None else round(float(inflation), 4),
        "ladder": values, "lab_queries": lab.describe(),
        "needs_over_twice_lab_knob": int(hard.sum()), "n_queries": int(hard.size),
        "ood_score": "percentile of the query's exact k-th neighbour distance among the lab "
                     "queries' k-th neighbour distances",
        "ood_auroc": auroc(scores, hard),
        "per_query": [{"id": qid, "knob": v, "ood_score": round(float(s), 4),
                       "needs_over_twice_lab_knob": bool(h)}
                      for qid, v, s, h in zip(ctx.queries.ids, pq, scores, hard)],
    }


@dataclass(frozen=True)
class Prepared:
    """A checked live sweep, before any search: the knob and its range, the queries."""

    knob: LiveKnob
    low: int
    high: int
    queries: LiveQueries
    lab: LiveQueries | None


def prepare(spec: LiveSweepSpec, col: LiveCollection) -> Prepared:
    """Every check that needs no search (knob, range, queries and their dimension): refusals
    come before the run directory is made."""
    knob, low, high = pick_knob(spec, col)
    base = Path(spec.source).parent if spec.source not in ("<memory>", "") else None
    queries = load_queries(spec.queries, col, base=base, seed=spec.seed)
    lab = None if spec.lab_queries is None else load_queries(
        spec.lab_queries, col, field="lab_queries", base=base, seed=spec.seed + 1)
    split_queries(queries.vectors.shape[0], spec.heldout_fraction, spec.seed)  # refusals
    if spec.lab_topology is not None:
        _segments(spec, None)  # a lab_topology that is no topology run: refused here
    return Prepared(knob, low, high, queries, lab)


def run_live(spec: LiveSweepSpec, col: LiveCollection, prep: Prepared,
             folder: Path, extra: list[LiveCollection] | None = None) -> dict[str, Any]:
    """The whole in-place sweep on an attached collection; returns the summary (without run
    ids). ``folder``: where a snapshot goes unless ``ground_truth.dir`` says otherwise;
    ``extra``: more handles on the same collection for ``budget.concurrency`` > 1."""
    extra = list(extra or [])
    desc = col.describe()
    knob, low, high, queries, lab = prep.knob, prep.low, prep.high, prep.queries, prep.lab
    pacer = Pacer(spec.budget)
    split = split_queries(queries.vectors.shape[0], spec.heldout_fraction, spec.seed)
    out: dict[str, Any] = {}
    ctx: LiveContext | None = None
    exhausted = None
    try:
        truth, snap, gt_s = ground_truth(spec, col, queries.vectors, pacer, folder, extra)
        ctx = LiveContext(spec, col, knob, low, high, pacer, queries, truth, snap, gt_s,
                          extra=extra)
        chosen, seen = target_search(ctx, split.tune)
        if chosen is not None:
            names = dict(desc.details.get("native_names") or {})
            names[knob.name] = knob.native
            out["chosen"] = {**seen[chosen], "native": {
                names.get(key, key): v for key, v in seen[chosen]["search"].items()}}
            if split.heldout.size:
                held = measure(ctx, chosen, split.heldout, what="held-out")
                out.update(heldout_recall=held["recall"], heldout_recall_lb=held["recall_lb"],
                           heldout_meets=bool(held["recall"] >= spec.target_recall - EPS))
        else:
            out["chosen"] = None
            out["miss"] = (f"no {knob.name} in [{low}, {high}] meets recall@{spec.k} >= "
                           f"{spec.target_recall} (lower bound) on these queries")
        if lab is not None:
            lab_truth, _, _ = ground_truth(spec, col, lab.vectors, pacer, folder, extra)
            out["query_shift"] = query_shift(ctx, split.tune, chosen, lab, lab_truth)
    except BudgetExhausted as exc:
        exhausted = str(exc)
        out.setdefault("chosen", None)
        log.warning("live sweep stopped: %s", exc)
    return _summary(spec, desc, knob, low, high, queries, split, pacer, ctx, out, exhausted)


def _summary(spec: LiveSweepSpec, desc: Any, knob: LiveKnob, low: int, high: int,
             queries: LiveQueries, split: Any, pacer: Pacer, ctx: LiveContext | None,
             out: dict[str, Any], exhausted: str | None) -> dict[str, Any]:
    from dataclasses import asdict

    shift = out.pop("query_shift", None)
    live = {
        "description": asdict(desc),
        "not_production_traffic": queries.not_production,
        "queries": queries.describe(),
        "ground_truth": {"method": spec.ground_truth.method,
                         "seconds": round(ctx.gt_seconds, 3) if ctx else None},
        "snapshot": ctx.snapshot if ctx else None,
        "budget": spec.budget.model_dump(),
        "spent": {"live_queries": pacer.queries, "wall_s": round(pacer.wall_s, 3)},
        "budget_exhausted": exhausted,
        "query_shift": shift,
    }
    if queries.not_production:
        live["label"] = NOT_PRODUCTION
    if desc.untested:
        live["untested"] = desc.untested
    live["segments"] = {**_segments(spec, desc.segments),
                        "segments_source": segments_source(desc)}
    return {
        "kind": "live-sweep", "workload": "live", "name": spec.name, "engine": desc.engine,
        "collection": desc.name, "metric": desc.metric, "k": spec.k, "strategy": "target",
        "target_recall": spec.target_recall, "confidence": spec.confidence.model_dump(),
        "queries": {**split.describe(), "source": queries.source,
                    "not_production_traffic": queries.not_production},
        "recall_definition": RECALL_DEFINITION, "latency_unit": "ms (single query, paced)",
        "knob": {"name": knob.name, "native": knob.native, "low": low, "high": high,
                 "default": knob.default},
        "evaluations": len(ctx.probes) if ctx else 0,
        "probes": ctx.probes if ctx else [],
        **out,
        "live": live,
    }


def segments_source(desc: LiveDescription) -> str | None:
    """How the engine's segment count was read, or why there is none (``unavailable: ...``)."""
    source = desc.details.get("segments_source")
    if source is None and desc.segments is None:
        return f"unavailable: {desc.engine} reports no segment count"
    return None if source is None else str(source)


def _segments(spec: LiveSweepSpec, segments: int | None) -> dict[str, Any]:
    """The collection's segment count (as the engine reports it; None: it does not) and, with
    ``lab_topology``, the comparison with that lab run (warning, the lab's knob for it)."""
    if spec.lab_topology is None:
        return {"collection_segments": segments}
    path = Path(spec.lab_topology)
    if not path.is_absolute() and spec.source not in ("<memory>", ""):
        path = Path(spec.source).parent / path
    lab = read_topology_run(path, "lab_topology")
    return knob_for_segments(lab, segments, f"{spec.source}: live collection")


__all__ = ["RECALL_DEFINITION", "LiveContext", "Prepared", "measure", "pick_knob", "prepare",
           "run_live",
           "target_search"]
