"""Measuring one config for the tuner, on top of :class:`retrieval.evaluation.Evaluator`.

Three kinds of measurement, all on a built index (never rebuilt for a search param):

- **full** (grid points, and the config a target search chose): the spec's modes on the tuning
  queries: single-query latency percentiles (ms) and batch QPS with ``batch_repeats``;
- **probe** (target search steps): one batch pass over the tuning queries, without warm-up:
  recall (what the search decides on; warm-up cannot change it) and the QPS of that pass
  (indicative; the chosen config is then timed in full);
- **held-out**: the chosen config, one batch pass over the held-out queries (recall only); it
  passes when its mean recall is >= the target;
- **at a step** of a live workload (the churn runner's search steps, :meth:`Measurer.at_step`):
  timed like full (single mode) or probed, against that step's exact truth.

One :class:`Measurer` for every workload: a filtered workload (``workload`` with buckets) is
measured the same three ways per (strategy, bucket) unit, each query with its own filter
(:class:`~retrieval.tune.filterbench.FilteredBench`); the sweep worker calls
:meth:`Measurer.point` and :meth:`Measurer.decide` whatever the workload.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.evaluation import BuiltIndex, Evaluator, Measurement, Mode, StepTruth
from retrieval.indexes.entry import SearchConfig
from retrieval.stats.metrics import latency_summary
from retrieval.tune import target as tgt
from retrieval.tune.bucket_summary import engine_call
from retrieval.tune.config import ConfidenceSpec, Objective
from retrieval.tune.decide import QuerySplit, choose, lower_bound
from retrieval.tune.filterbench import FilteredBench, filtered_row
from retrieval.tune.results import HeldOut, PointResult, UnitResult
from retrieval.tune.retrieved import RetrievedIds
from retrieval.tune.units import Unit
from retrieval.workload import Workload

log = logging.getLogger(__name__)

#: slack when comparing a bound with the target (float sums of exact fractions)
EPS = 1e-9

#: the post-filter's over-fetch factor: a knob of the strategy, not a search param of the index
OVERFETCH = "overfetch"

#: a search config: as written (validated by the evaluator) or already validated
Search = Mapping[str, Any] | SearchConfig


@contextmanager
def _one_pass(ev: Evaluator) -> Iterator[None]:
    """One batch pass without warm-up (for recall; its QPS is indicative only)."""
    saved = ev.batch_repeats, ev.warmup
    ev.batch_repeats, ev.warmup = 1, 0
    try:
        yield
    finally:
        ev.batch_repeats, ev.warmup = saved


def attach_memory_report(built: BuiltIndex, base: np.ndarray, label: str,
                         build: Mapping[str, Any]) -> None:
    """Measure the resident memory of ``built`` (:func:`retrieval.memory.measure`), log the
    memory doctor's flags and keep the report on ``built`` (its points then carry
    ``bytes_per_vector``)."""
    from retrieval import memory

    rep = memory.measure(built.index, built.info.n, base)
    for flag in rep.flags:
        log.warning("memory doctor: %s %s: %s", label, build, flag)
    built.memory_report = rep.to_dict()


def _memory_fields(built: BuiltIndex | None) -> dict[str, Any]:
    rep = None if built is None else built.memory_report
    if rep is None:
        return {}
    return {"bytes_per_vector": rep.get("bytes_per_vector"), "memory": dict(rep)}


@dataclass
class Measurer:
    ev: Evaluator
    split: QuerySplit
    modes: Sequence[Mode]
    target: float | None
    conf: ConfidenceSpec
    seed: int
    #: where a unit's chosen config saves its retrieved ids (None: not saved)
    retrieved: RetrievedIds | None = None
    #: what is measured: None (or a plain workload) for plain search; a filtered workload
    #: (buckets with their exact filtered ground truth) is timed by a FilteredBench
    workload: Workload | None = None
    #: a quality target (:class:`retrieval.tune.quality.QualitySearch`): each target unit's
    #: quality knob is searched beside its recall knob at :meth:`decide`
    quality: Any = None
    bench: FilteredBench | None = field(default=None, init=False)
    #: tune.query_subset: share of the tuning queries the knob search runs on after its first
    #: step (1.0: every query; :mod:`retrieval.tune.subset`)
    subset: float = 1.0
    #: id of a built index -> (the index, kept so its id is never reused; its subset of
    #: tuning queries, row numbers)
    _subsets: dict[int, tuple[Any, np.ndarray]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.workload is not None and self.workload.kind == "filtered":
            self.bench = FilteredBench(self.ev, self.workload)

    def meets(self, lb: float) -> bool | None:
        return None if self.target is None else bool(lb >= self.target - EPS)

    def _result(self, ms: list[Measurement], search: Search,
                built: BuiltIndex | None = None) -> PointResult:
        single = next((m for m in ms if m.mode == "single"), None)
        batch = next((m for m in ms if m.mode == "batch"), None)
        ref = batch or single
        assert ref is not None
        lb = lower_bound(ref.per_query_recall, ref.k, self.conf, self.seed)
        lat = latency_summary(single.latency_ms) if single is not None else {}
        s = ref.summary()
        return PointResult(
            search=dict(search.given if isinstance(search, SearchConfig) else search),
            recall=ref.recall,
            recall_lb=lb,
            recall_tie=float(ref.per_query_recall_tie.mean()),
            recall_p5=float(s["recall_p5"]),
            n_queries=ref.n_queries,
            p50_ms=lat.get("p50_ms"),
            p95_ms=lat.get("p95_ms"),
            p99_ms=lat.get("p99_ms"),
            qps=ref.qps,
            build_s=ref.build_s,
            memory_bytes=ref.memory_bytes,
            meets=self.meets(lb),
            **_memory_fields(built),
        )

    def full(self, built: BuiltIndex, search: Search) -> PointResult:
        ms = self.ev.measure(
            built, search, modes=self.modes, query_idx=self.split.tune, query_set="tune"
        )
        return self._result(ms, search, built)

    def probe(self, built: BuiltIndex, search: Search, *, every_query: bool = False
              ) -> PointResult:
        """One untimed-setup batch pass (a target search's step): on the build's query subset
        once its first step chose one (``tune.query_subset`` < 1), else (or ``every_query``)
        on every tuning query."""
        return self.probe_per_query(built, search, every_query=every_query)[0]

    def probe_per_query(self, built: BuiltIndex, search: Search, *, every_query: bool = False
                        ) -> tuple[PointResult, np.ndarray]:
        """:meth:`probe`, with the measured queries' per-query recall@k (what a scale study's
        bootstrap band and knob curves are made of)."""
        from retrieval.tune.subset import stratified_subset

        got = None if every_query else self._subsets.get(id(built.index))
        idx = None if got is None else got[1]
        with _one_pass(self.ev):
            ms = self.ev.measure(built, search, modes=["batch"],
                                 query_idx=self.split.tune if idx is None else idx,
                                 query_set="tune")
        if idx is None and not every_query and self.subset < 1.0 and self.workload is None:
            self._subsets[id(built.index)] = (built.index, stratified_subset(
                self.split.tune, ms[0].per_query_recall, self.subset, self.seed))
        return self._result(ms, search, built), ms[0].per_query_recall

    def at_step(self, built: BuiltIndex, search: Search, truth: StepTruth, *,
                timed: bool = True) -> tuple[PointResult, Measurement]:
        """One point of a live workload's step (a churn runbook's search step) on the tuning
        queries, scored against the step's exact ``truth`` (the live set's, caller ids, the
        fewer-than-k rule): ``timed``, single mode after the evaluator's warm-up (p50/p95/p99
        in ms); else one untimed batch pass (recall only: a target search's step). The point
        and its :class:`~retrieval.evaluation.Measurement` (the retrieved ids)."""
        if timed:
            ms = self.ev.measure(built, search, modes=["single"], query_idx=self.split.tune,
                                 query_set="live", truth=truth)
        else:
            with _one_pass(self.ev):
                ms = self.ev.measure(built, search, modes=["batch"],
                                     query_idx=self.split.tune, query_set="live", truth=truth)
        return self._result(ms, search, built), ms[0]

    def retrieve(self, built: BuiltIndex, search: Search, query_idx: np.ndarray) -> np.ndarray:
        """The base rows ``search`` retrieves for the queries ``query_idx`` (one untimed batch
        pass; (n, k), -1 for no result)."""
        with _one_pass(self.ev):
            (m,) = self.ev.measure(built, search, modes=["batch"], query_idx=query_idx,
                                   query_set="tune")
        assert m.ids is not None
        return np.asarray(m.ids)

    def keep(self, built: BuiltIndex, label: str, search: Search) -> None:
        """Save the ids ``search`` retrieves for every query (one untimed batch pass) in
        :attr:`retrieved`."""
        if self.retrieved is None:
            return
        with _one_pass(self.ev):
            (m,) = self.ev.measure(built, search, modes=["batch"])
        self.retrieved.add({"backend": built.backend, "label": label,
                            "build": built.build_dict, "search": m.search},
                           m.query_idx, m.ids, "all")

    def heldout(self, built: BuiltIndex, search: Search) -> HeldOut | None:
        if self.split.heldout.size == 0:
            return None
        with _one_pass(self.ev):
            (m,) = self.ev.measure(
                built, search, modes=["batch"], query_idx=self.split.heldout,
                query_set="heldout",
            )
        lb = lower_bound(m.per_query_recall, m.k, self.conf, self.seed)
        # an independent estimate of the same mean: it passes when it is >= the target (the
        # tuning bound makes that likely at the confidence level); its own bound is reported
        return HeldOut(m.recall, lb, m.n_queries, self.meets(m.recall))

    # --- one unit of the sweep, whatever the workload -------------------------------------
    @property
    def _bench(self) -> FilteredBench:
        assert self.bench is not None, "a filtered unit needs a filtered workload"
        return self.bench

    def point(self, built: BuiltIndex, unit: Unit, search: dict[str, Any],
              config: Callable[[dict[str, Any]], SearchConfig]) -> PointResult:
        """One point of ``unit``: a filtered unit's search step (one batch pass), a target
        search step (:meth:`probe`) or a grid point (:meth:`full`). ``config`` validates a plain
        search config on the unit's build."""
        if unit.strategy is not None:
            return self._filtered_probe(built, unit, search)
        if unit.method == "target":
            return self.probe(built, config(search))
        return self.full(built, config(search))

    def decide(self, built: BuiltIndex, unit: Unit, measured: Mapping[str, PointResult],
               objective: Objective, config: Callable[[dict[str, Any]], SearchConfig]
               ) -> UnitResult:
        """The unit's cheapest config meeting the target, timed in full, re-measured on the
        held-out queries, its retrieved ids kept (:attr:`retrieved`)."""
        if unit.strategy is not None:
            return self._filtered_decide(built, unit, measured)
        points = list(measured.values())
        chosen = choose(points, unit.knob, objective)
        infeasible = unit.infeasible(measured) or (self.target is not None and chosen is None)
        extra: dict[str, Any] = {}
        if chosen is not None and unit.method == "target":
            # latency percentiles of the chosen config
            full = self.full(built, config(chosen.search))
            if abs(full.recall - chosen.recall) > 1e-12:
                extra["probe_recall"] = chosen.recall
                extra["probe_recall_lb"] = chosen.recall_lb
            if id(built.index) in self._subsets and unit.knob2 is None:
                full, extra["query_subset"] = self._confirm(built, unit, points, full, config)
            chosen = full
        heldout = None
        if chosen is not None:
            heldout = self.heldout(built, config(chosen.search))
            self.keep(built, unit.label, config(chosen.search))
        if self.quality is not None and unit.method == "target" and unit.knob2 is None:
            extra["quality"] = self.quality.search_unit(self, built, unit, chosen, config)
        return UnitResult(chosen, len(points), infeasible, heldout, extra=extra)

    def _confirm(self, built: BuiltIndex, unit: Unit, points: Sequence[PointResult],
                 full: PointResult, config: Callable[[dict[str, Any]], SearchConfig]
                 ) -> tuple[PointResult, dict[str, Any]]:
        """tune.query_subset: the subset's answer (``full``: timed on every tuning query)
        raised until it meets on every tuning query, the value below it measured there too
        (:mod:`retrieval.tune.subset`); returns the kept point and the unit's note."""
        from retrieval.tune.subset import MAX_RAISES, next_up, subset_doc

        assert unit.knob is not None
        n_tune = int(self.split.tune.size)
        first = value = int(full.search[unit.knob])
        point, raises, spent = full, 0, 0
        while point.meets is False and value < unit.high and raises < MAX_RAISES:
            value = next_up(value, unit.high)
            point = self.full(built, config(unit.point(value)))
            raises, spent = raises + 1, spent + n_tune
        lower: bool | None = None
        if point.meets and value > unit.low:
            below = self.probe(built, config(unit.point(value - 1)), every_query=True)
            lower, spent = bool(below.meets), spent + n_tune
        size = int(self._subsets[id(built.index)][1].size)
        return point, subset_doc(self.subset, size, n_tune, points, first, value, lower, spent)

    # --- a filtered workload's units (strategy x bucket) ----------------------------------
    def _keep(self, p: Measurement) -> None:
        if self.retrieved is not None:
            assert p.filtered is not None
            cell = p.filtered
            self.retrieved.add({"backend": p.backend, "label": cell.label, "build": p.build,
                                "search": p.search, "strategy": cell.strategy,
                                "bucket": cell.bucket.name, "overfetch": cell.overfetch},
                               p.query_idx, p.ids, p.query_set)

    def _lb(self, p: Measurement) -> float:
        return lower_bound(p.per_query_recall, self.ev.k, self.conf, self.seed)

    def _point(self, built: BuiltIndex, unit: Unit, search: Mapping[str, Any], *,
               full: bool = False, heldout: bool = False) -> Measurement:
        params = {k: v for k, v in search.items() if k != OVERFETCH}
        overfetch = search.get(OVERFETCH) if unit.strategy == "postfilter" else None
        qidx, qset = (self.split.heldout, "heldout") if heldout else (self.split.tune, "tune")
        one = {} if full else {"warmup": 0, "repeats": 1}
        assert unit.strategy is not None and unit.bucket is not None
        return self._bench.measure(
            built, params, unit.strategy, self._bench.workload.bucket(unit.bucket),
            label=unit.label, overfetch=overfetch, modes=self.modes if full else ("batch",),
            query_idx=qidx, query_set=qset, **one)

    def _filtered_probe(self, built: BuiltIndex, unit: Unit, search: Mapping[str, Any]
                        ) -> PointResult:
        """One search step: recall, its lower bound and whether it meets the target."""
        p = self._point(built, unit, search)
        lb = self._lb(p)
        target = self.target or 1.0
        row = {**filtered_row(p, target), "recall_lb": lb, "timing": "probe"}
        return PointResult(
            search=dict(search), recall=float(row["recall"]), recall_lb=lb,
            recall_tie=float(row["recall_tie"]), recall_p5=float(row["recall_p5"]),
            n_queries=int(row["n_queries"]), p50_ms=None, p95_ms=None, p99_ms=None,
            qps=p.qps, build_s=0.0, memory_bytes=None, meets=bool(lb >= target - EPS),
            extra={"row": _jsonable(row)})

    def _filtered_decide(self, built: BuiltIndex, unit: Unit,
                         measured: Mapping[str, PointResult]) -> UnitResult:
        """The smallest knob value meeting the target (the unit's search answer), timed in
        full and re-measured on the held-out queries; the choice document in ``extra``."""
        knob = unit.knob if unit.method == "target" else None
        if knob is None:
            value = 0 if any(p.meets for p in measured.values()) else None
        else:
            value = tgt.answer(unit.low, unit.high, unit.known(measured))
        doc: dict[str, Any] = {
            "label": unit.label, "backend": built.backend, "build": built.build_dict,
            "strategy": unit.strategy, "bucket": unit.bucket,
            "selectivity": self._bench.workload.bucket(str(unit.bucket)).selectivity,
            "target_selectivity": self._bench.workload.bucket(str(unit.bucket)).target,
            "knob_name": knob, "range": [unit.low, unit.high] if knob else None,
            "evaluations": len(measured), "chosen": value is not None, "meets": False,
            "best_probe_recall": max((p.recall for p in measured.values()), default=None)}
        if value is None:
            return UnitResult(None, len(measured), True, extra={"choice": _jsonable(doc)})
        search = dict(unit.fixed) if knob is None else unit.point(value)
        params = {k: v for k, v in search.items() if k != OVERFETCH}
        overfetch = search.get(OVERFETCH) if unit.strategy == "postfilter" else None
        full = self._point(built, unit, search, full=True)
        self._keep(full)
        row = filtered_row(full, self.target)
        doc.update({k: row.get(k) for k in ("recall", "recall_p5", "share_below_target",
                                            "p50_ms", "p95_ms", "p99_ms", "qps", "filter")})
        doc.update({"search": params, "overfetch": overfetch, "meets": True,
                    "knob": {knob: value} if knob else {}, "recall_lb": self._lb(full),
                    "engine_call": engine_call(built.backend, str(unit.strategy), params,
                                               overfetch, self.ev.k)})
        held: HeldOut | None = None
        if self.split.heldout.size:
            h = self._point(built, unit, search, heldout=True)
            self._keep(h)
            doc["heldout_recall"] = filtered_row(h, None)["recall"]
            doc["heldout_meets"] = bool(doc["heldout_recall"] >= (self.target or 1) - EPS)
            held = HeldOut(float(doc["heldout_recall"]), self._lb(h), len(self.split.heldout),
                           doc["heldout_meets"])
        return UnitResult(None, len(measured), False, held, extra={"choice": _jsonable(doc)})


def _jsonable(v: Any) -> Any:
    """Plain JSON values (numpy scalars as Python numbers), for the study's user attrs."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v
