"""Measuring one config for the tuner, on top of :class:`retrieval.evaluation.Evaluator`.

Three kinds of measurement, all on a built index (never rebuilt for a search param):

- **full** (grid points, and the config a target search chose): the spec's modes on the tuning
  queries: single-query latency percentiles (ms) and batch QPS with ``batch_repeats``;
- **probe** (target search steps): one batch pass over the tuning queries, without warm-up:
  recall (what the search decides on; warm-up cannot change it) and the QPS of that pass
  (indicative; the chosen config is then timed in full);
- **held-out**: the chosen config, one batch pass over the held-out queries (recall only); it
  passes when its mean recall is >= the target.

A filtered workload is measured the same three ways (:class:`FilteredMeasurer`), each query with
its own filter (:class:`FilteredBench`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.evaluation import BuiltIndex, Evaluator, Measurement, Mode
from retrieval.groundtruth.exact import exact_distances
from retrieval.indexes.base import SearchResult
from retrieval.indexes.entry import SearchConfig, apply_search
from retrieval.indexes.filtered import (
    check_strategy,
    postfilter_depth,
    prepare_base,
    raise_ef_for,
    strategy_call,
)
from retrieval.stats.metrics import latency_summary, recall_summary
from retrieval.timing import time_each, time_repeat, warm_up
from retrieval.tune import target as tgt
from retrieval.tune.bucket_summary import engine_call
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import QuerySplit, lower_bound
from retrieval.tune.results import HeldOut, PointResult, UnitResult
from retrieval.tune.retrieved import RetrievedIds
from retrieval.tune.units import Unit
from retrieval.workload import (
    Bucket,
    FilteredGT,
    Workload,
    check_runnable,
    filtered_recall,
    filtered_recall_tie,
    filtered_workload,
)

log = logging.getLogger(__name__)

#: slack when comparing a bound with the target (float sums of exact fractions)
EPS = 1e-9

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

    def probe(self, built: BuiltIndex, search: Search) -> PointResult:
        with _one_pass(self.ev):
            ms = self.ev.measure(
                built, search, modes=["batch"], query_idx=self.split.tune, query_set="tune"
            )
        return self._result(ms, search, built)

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


@dataclass(frozen=True, eq=False)
class FilterPoint:
    """One measured (config, strategy, bucket). Latencies in ms (single mode), QPS from batch
    mode (else 1000 / mean single latency)."""

    backend: str
    label: str
    build: dict[str, Any]
    search: dict[str, Any]
    strategy: str
    overfetch: int | None
    bucket: Bucket
    per_query_recall: np.ndarray
    per_query_recall_tie: np.ndarray
    latency_ms: np.ndarray | None
    qps: float
    query_set: str = "all"
    extra: dict[str, Any] = field(default_factory=dict)
    #: the retrieved row positions (n_queries, k), -1 = no result (saved as the caller's ids)
    ids: np.ndarray | None = None
    #: the positions of the measured queries in the dataset's query order
    query_idx: np.ndarray | None = None

    def row(self, target: float | None) -> dict[str, Any]:
        desc = self.bucket.describe()
        out: dict[str, Any] = {
            "backend": self.backend, "label": self.label, "build": dict(self.build),
            "search": dict(self.search), "strategy": self.strategy, "overfetch": self.overfetch,
            "bucket": self.bucket.name, "filter": desc["filter"],
            "selectivity": desc["selectivity"], "target_selectivity": self.bucket.target,
            "query_set": self.query_set, "n_queries": int(self.per_query_recall.shape[0]),
            **recall_summary(self.per_query_recall, target),
            "recall_tie": float(self.per_query_recall_tie.mean()),
            "p50_ms": None, "p95_ms": None, "p99_ms": None, "qps": self.qps,
            **self.extra,
        }
        if self.latency_ms is not None:
            lat = latency_summary(self.latency_ms)
            out.update({k: lat[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")})
        return out


class FilteredBench:
    """A filtered :class:`~retrieval.workload.Workload` (buckets + their exact filtered ground
    truth) over an :class:`Evaluator` (which builds the indexes). Each search is timed with
    :mod:`retrieval.timing`:

    - **single** mode: each query timed alone with its own filter (the strategy's whole call:
      the engine's filtered search, the pre-filter's gather + exact search, or the post-filter's
      over-fetch + filter), after a warm-up; p50/p95/p99 in ms;
    - **batch** mode: one call per distinct filter over the queries using it, the whole pass
      timed (best of ``batch_repeats``): QPS.

    Recall is under the fewer-than-k rule (:mod:`retrieval.workload.truth`), after timing.
    """

    def __init__(self, ev: Evaluator, buckets: Sequence[Bucket] | Workload) -> None:
        ds = ev.ds
        self.ev = ev
        self.workload = buckets if isinstance(buckets, Workload) else filtered_workload(
            list(buckets), (), base=ds.base, queries=ds.queries, metric=ds.metric, k=ev.k,
            fingerprint=ds.fingerprint)
        check_runnable(self.workload, where="filtered workload")
        self.buckets = list(self.workload.buckets)
        self.base = prepare_base(ds.base, ds.metric)
        self.gt: Mapping[str, FilteredGT] = self.workload.truth
        ev.attributes = ds.attributes

    def measure(self, built: BuiltIndex, config: SearchConfig | dict[str, Any], strategy: str,
                bucket: Bucket, *, label: str, overfetch: int | None = None,
                modes: Sequence[str] = ("single", "batch"), query_idx: np.ndarray | None = None,
                query_set: str = "all", warmup: int | None = None,
                repeats: int | None = None) -> FilterPoint:
        ev = self.ev
        k = ev.k
        cfg = ev.check_search(built, config)
        apply_search(built.index, cfg)
        check_strategy(built.index, strategy, built.backend)
        n = ev.ds.n_base
        extra: dict[str, Any] = {}
        if strategy == "postfilter":
            depth = postfilter_depth(k, overfetch or 1, n)
            raised = raise_ef_for(built.index, depth)
            extra = {"fetch_depth": depth, **({"raised": raised} if raised else {})}
        call = strategy_call(built.index, strategy, k, base=self.base, metric=ev.ds.metric,
                             overfetch=overfetch or 1, n=n)
        qidx = np.arange(ev.ds.n_queries) if query_idx is None else np.asarray(query_idx)
        queries = np.ascontiguousarray(ev.ds.queries[qidx])
        flts = [bucket.filter_for(int(q)) for q in qidx]
        items = [(queries[i:i + 1], flts[i]) for i in range(len(qidx))]
        warm_up(lambda it: call(*it), items, ev.warmup if warmup is None else warmup)
        res: SearchResult | None = None
        lat = None
        qps = 0.0
        if "single" in modes:
            res, lat = _time_single(call, items, k)
            qps = 1000.0 / float(lat.mean())
        if "batch" in modes:
            res, best_s = _time_batch(call, queries, bucket, qidx, k,
                                      ev.batch_repeats if repeats is None else repeats)
            qps = len(qidx) / best_s
        assert res is not None
        gt = self.gt[bucket.name].rows(qidx)
        ids = res.ids
        rec = filtered_recall(ids, gt, k)
        inside = (ids >= 0) & np.stack([f.mask[np.maximum(r, 0)] for f, r in zip(flts, ids)])
        exact = exact_distances(ev.ds, np.where(inside, ids, -1), queries)
        return FilterPoint(
            backend=built.backend, label=label, build=built.build_dict,
            search=cfg.search.model_dump(mode="json"), strategy=strategy,
            overfetch=overfetch if strategy == "postfilter" else None, bucket=bucket,
            per_query_recall=rec, per_query_recall_tie=filtered_recall_tie(exact, gt, k),
            latency_ms=lat, qps=float(qps), query_set=query_set, extra=extra,
            ids=ids[:, :k], query_idx=qidx,
        )


def _time_single(call: Any, items: list[tuple[np.ndarray, Any]], k: int
                 ) -> tuple[SearchResult, np.ndarray]:
    """Each (query, filter) timed alone (:func:`retrieval.timing.time_each`): (result, ms)."""
    nq = len(items)
    ids = np.full((nq, k), -1, dtype=np.int64)
    dist = np.full((nq, k), np.inf, dtype=np.float32)
    outs, lat = time_each(lambda it: call(*it), items)
    for i, r in enumerate(outs):
        m = min(r.ids.shape[1], k)
        ids[i, :m], dist[i, :m] = r.ids[0, :m], r.distances[0, :m]
    return SearchResult(ids, dist), lat


def _time_batch(call: Any, queries: np.ndarray, bucket: Bucket, qidx: np.ndarray, k: int,
                repeats: int) -> tuple[SearchResult, float]:
    """One call per distinct filter, the whole pass timed (:func:`retrieval.timing.time_repeat`,
    best of ``repeats``): (result, best pass in s)."""
    nq = len(queries)
    ids = np.full((nq, k), -1, dtype=np.int64)
    dist = np.full((nq, k), np.inf, dtype=np.float32)
    groups = bucket.groups(qidx)
    parts = [(np.ascontiguousarray(queries[pos]), f) for f, pos in groups]
    outs, times = time_repeat(lambda: [call(q, f) for q, f in parts], max(1, repeats))
    for (_, pos), r in zip(groups, outs):
        m = min(r.ids.shape[1], k)
        ids[pos, :m], dist[pos, :m] = r.ids[:, :m], r.distances[:, :m]
    return SearchResult(ids, dist), max(float(times.min()) / 1e3, 1e-9)


def _jsonable(v: Any) -> Any:
    """Plain JSON values (numpy scalars as Python numbers), for the study's user attrs."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


#: the post-filter's over-fetch factor: a knob of the strategy, not a search param of the index
OVERFETCH = "overfetch"


@dataclass
class FilteredMeasurer:
    """The sweep worker's measurements of a filtered unit (one entry x build x strategy x
    bucket): search steps are one batch pass over the tuning queries (no warm-up); the chosen
    setting is timed in full (the spec's modes) and re-measured on the held-out queries."""

    bench: FilteredBench
    split: QuerySplit
    modes: Sequence[Mode]
    target: float | None
    conf: ConfidenceSpec
    seed: int
    #: where a unit's chosen setting saves its retrieved ids (None: not saved)
    retrieved: RetrievedIds | None = None

    def _keep(self, p: FilterPoint) -> None:
        if self.retrieved is not None:
            self.retrieved.add({"backend": p.backend, "label": p.label, "build": p.build,
                                "search": p.search, "strategy": p.strategy,
                                "bucket": p.bucket.name, "overfetch": p.overfetch},
                               p.query_idx, p.ids, p.query_set)

    def _lb(self, p: FilterPoint) -> float:
        return lower_bound(p.per_query_recall, self.bench.ev.k, self.conf, self.seed)

    def _point(self, built: BuiltIndex, unit: Unit, search: Mapping[str, Any], *,
               full: bool = False, heldout: bool = False) -> FilterPoint:
        params = {k: v for k, v in search.items() if k != OVERFETCH}
        overfetch = search.get(OVERFETCH) if unit.strategy == "postfilter" else None
        qidx, qset = (self.split.heldout, "heldout") if heldout else (self.split.tune, "tune")
        one = {} if full else {"warmup": 0, "repeats": 1}
        assert unit.strategy is not None and unit.bucket is not None
        return self.bench.measure(
            built, params, unit.strategy, self.bench.workload.bucket(unit.bucket),
            label=unit.label, overfetch=overfetch, modes=self.modes if full else ("batch",),
            query_idx=qidx, query_set=qset, **one)

    def probe(self, built: BuiltIndex, unit: Unit, search: Mapping[str, Any]) -> PointResult:
        """One search step: recall, its lower bound and whether it meets the target."""
        p = self._point(built, unit, search)
        lb = self._lb(p)
        target = self.target or 1.0
        row = {**p.row(target), "recall_lb": lb, "timing": "probe"}
        return PointResult(
            search=dict(search), recall=float(row["recall"]), recall_lb=lb,
            recall_tie=float(row["recall_tie"]), recall_p5=float(row["recall_p5"]),
            n_queries=int(row["n_queries"]), p50_ms=None, p95_ms=None, p99_ms=None,
            qps=p.qps, build_s=0.0, memory_bytes=None, meets=bool(lb >= target - EPS),
            extra={"row": _jsonable(row)})

    def decide(self, built: BuiltIndex, unit: Unit, measured: Mapping[str, PointResult]
               ) -> UnitResult:
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
            "selectivity": self.bench.workload.bucket(str(unit.bucket)).selectivity,
            "target_selectivity": self.bench.workload.bucket(str(unit.bucket)).target,
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
        row = full.row(self.target)
        doc.update({k: row.get(k) for k in ("recall", "recall_p5", "share_below_target",
                                            "p50_ms", "p95_ms", "p99_ms", "qps", "filter")})
        doc.update({"search": params, "overfetch": overfetch, "meets": True,
                    "knob": {knob: value} if knob else {}, "recall_lb": self._lb(full),
                    "engine_call": engine_call(built.backend, str(unit.strategy), params,
                                               overfetch, self.bench.ev.k)})
        held: HeldOut | None = None
        if self.split.heldout.size:
            h = self._point(built, unit, search, heldout=True)
            self._keep(h)
            doc["heldout_recall"] = h.row(None)["recall"]
            doc["heldout_meets"] = bool(doc["heldout_recall"] >= (self.target or 1) - EPS)
            held = HeldOut(float(doc["heldout_recall"]), self._lb(h), len(self.split.heldout),
                           doc["heldout_meets"])
        return UnitResult(None, len(measured), False, held, extra={"choice": _jsonable(doc)})
