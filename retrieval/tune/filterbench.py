"""Timing filtered searches: a filtered :class:`~retrieval.workload.Workload` measured on a built
index, each query with its own filter (:class:`FilteredBench`), one
:class:`~retrieval.evaluation.Measurement` (with its :class:`~retrieval.evaluation.FilterCell`)
per (config, strategy, bucket): the evaluation loop's one point record. The sweep's
:class:`~retrieval.tune.measure.Measurer` reads it for a filtered workload; ``rwb eval`` for
every filtered point (:func:`filtered_row`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval.evaluation import BuiltIndex, Evaluator, FilterCell, Measurement
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
from retrieval.workload import (
    Bucket,
    FilteredGT,
    Workload,
    check_runnable,
    filtered_recall,
    filtered_recall_tie,
    filtered_workload,
)


def filtered_row(m: Measurement, target: float | None) -> dict[str, Any]:
    """The row of one filtered measurement (``m.filtered`` set): its cell, selectivity, recall
    (fewer-than-k rule) and, when single mode ran, p50/p95/p99/max in ms; QPS from batch mode
    (else 1000 / mean single latency)."""
    cell = m.filtered
    assert cell is not None, "a filtered row needs a filtered measurement"
    desc = cell.bucket.describe()
    out: dict[str, Any] = {
        "backend": m.backend, "label": cell.label, "build": dict(m.build),
        "search": dict(m.search), "strategy": cell.strategy, "overfetch": cell.overfetch,
        "bucket": cell.bucket.name, "filter": desc["filter"],
        "selectivity": desc["selectivity"], "target_selectivity": cell.bucket.target,
        "query_set": m.query_set, "n_queries": m.n_queries,
        **recall_summary(m.per_query_recall, target),
        "recall_tie": float(m.per_query_recall_tie.mean()),
        "p50_ms": None, "p95_ms": None, "p99_ms": None, "qps": m.qps,
        **m.extra,
    }
    if m.mode == "single":
        lat = latency_summary(m.latency_ms)
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
                repeats: int | None = None) -> Measurement:
        """One (config, strategy, bucket) on the queries ``query_idx`` (default all): a
        :class:`~retrieval.evaluation.Measurement` with its :class:`FilterCell` (``mode``
        single when single mode ran: its per-query latencies in ms; else batch: the best
        pass in ms)."""
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
        lat: np.ndarray | None = None
        qps = 0.0
        if "single" in modes:
            res, lat = _time_single(call, items, k)
            qps = 1000.0 / float(lat.mean())
        if "batch" in modes:
            res, best_s = _time_batch(call, queries, bucket, qidx, k,
                                      ev.batch_repeats if repeats is None else repeats)
            qps = len(qidx) / best_s
            if lat is None:
                lat = np.array([best_s * 1e3])
        assert res is not None
        gt = self.gt[bucket.name].rows(qidx)
        ids = res.ids
        rec = filtered_recall(ids, gt, k)
        inside = (ids >= 0) & np.stack([f.mask[np.maximum(r, 0)] for f, r in zip(flts, ids)])
        exact = exact_distances(ev.ds, np.where(inside, ids, -1), queries)
        return Measurement(
            backend=built.backend, build=built.build_dict,
            search=cfg.search.model_dump(mode="json"),
            mode="single" if "single" in modes else "batch", k=k,
            per_query_recall=rec, per_query_recall_tie=filtered_recall_tie(exact, gt, k),
            latency_ms=np.asarray(lat, dtype=np.float64), qps=float(qps),
            build_s=built.info.build_s, memory_bytes=built.memory_bytes, threads=ev.threads,
            query_set=query_set, extra=extra, ids=ids[:, :k], query_idx=qidx,
            filtered=FilterCell(label, strategy, bucket,
                                overfetch if strategy == "postfilter" else None),
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


__all__ = ["FilteredBench", "filtered_row"]
