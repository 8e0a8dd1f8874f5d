"""Searching while writing (the load spec's ``writes`` section): the open loop searches at a
fixed offered rate (coordinated-omission-corrected percentiles, as every open-loop point) while
a writer thread inserts and deletes at fixed rates on the same index; the result is recall@k
over the live set and corrected p99 over time, and the largest search rate at which p99 <= the
SLO and recall >= the target hold during the writes (the capacity search of :mod:`.capacity`).

How one config runs: the index is built on the first ``initial_fraction`` of the base rows
under ids that are not row numbers (``id_offset + generation * n_base + row``); an index with
:class:`~retrieval.indexes.base.SupportsReserve` makes room for every base row first (hnswlib
cannot grow while other threads search). Each point then runs the open loop for ``duration_s``
and, from the same start, the writer: an insert batch every ``batch / insert_rate`` seconds
(rows not live, oldest deleted first, each under a new id: a row inserted again gets the next
generation), a delete batch every ``batch / delete_rate`` seconds (live ids drawn by a seeded
generator; at least ``k`` stay live), and every ``recall_every_s`` a recall sample: the writer
thread itself searches ``recall_queries`` queries (no write is in flight then) and compares
with :class:`~retrieval.groundtruth.live.LiveGroundTruth`, which follows every write (exact top-k
over the live set, kept incrementally). A returned id that is not live is counted
(``dead_returned``), results short of k too. Writes run on schedule (open loop); a late writer
catches up and its lag is reported. Points of one config continue the same churn (the index is
not rebuilt between points), so the live set at a point's start is the previous point's end.

Each point is run by the load generator's one point runner
(:class:`~retrieval.bench.load.points.LoadPointRunner` with ``writes``); recall samples are
scored by the evaluation loop's recall (:func:`retrieval.evaluation.per_query_recall`, the
live set's rule). Per point (a row of points.parquet, ``mode`` "open-writes"): the open-loop row of
:func:`~retrieval.bench.load.stats.summarise_point` with ``recall`` (mean of the samples in the
measured window), ``recall_min``, the write rates offered and achieved (vectors per second),
write-call latency p50 / p99 (ms) per kind, ``live_start`` / ``live_end``, ``inserts_starved``
(insert batches with no row left to insert), and ``meets_slo`` judged on ``recall_min``. The
timeline (one entry per recall sample: ``t_s`` since the point's start, recall mean / p5,
live count, corrected p99 of the searches intended since the previous sample) goes to the
summary and to ``writes_timeline.parquet``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.bench.load.capacity import search_capacity
from retrieval.bench.load.drivers import Target
from retrieval.bench.load.spec import LoadSpec, WritesSpec
from retrieval.bench.load.stats import NOT_SENT, meets_slo
from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.evaluation import per_query_recall
from retrieval.groundtruth.live import LiveGroundTruth
from retrieval.indexes.base import SupportsHotSearch, SupportsReserve
from retrieval.indexes.writes import require_writes
from retrieval.timing import clock_ns

log = logging.getLogger(__name__)
MODE = "open-writes"


@dataclass
class Sample:
    """One recall sample: ``t_s`` seconds since the point's start."""

    t_s: float
    recall: float
    recall_p5: float
    short_of_k: float
    dead_returned: int
    live: int
    inserted: int
    deleted: int


@dataclass
class WriterLog:
    """What the writer did during one point (latencies in ns per call)."""

    insert_ns: list[int] = field(default_factory=list)
    delete_ns: list[int] = field(default_factory=list)
    inserted: int = 0
    deleted: int = 0
    starved: int = 0
    lag_ns: list[int] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    error: str | None = None


class Churn:
    """The live set of one config across its points: which base rows are live under which
    ids, the rows waiting to be inserted (oldest deleted first), the exact answers over the
    live set (:class:`LiveGroundTruth`), and the writer that changes all of it with the
    index."""

    def __init__(self, index: Any, ds: VectorDataset, k: int, w: WritesSpec, seed: int) -> None:
        self.index, self.ds, self.k, self.w = index, ds, k, w
        n = ds.n_base
        self.n0 = min(n, max(k, int(w.initial_fraction * n)))
        self.gen = np.zeros(n, dtype=np.int64)
        self.pool: deque[int] = deque(range(self.n0, n))
        self.live_rows: list[int] = list(range(self.n0))
        self.pos: dict[int, int] = {r: i for i, r in enumerate(self.live_rows)}
        self.rng = np.random.default_rng(seed)
        nq = min(w.recall_queries, ds.n_queries)
        self.probe = np.ascontiguousarray(ds.queries[:nq], dtype=np.float32)
        self.gt = LiveGroundTruth(self.probe, ds.metric, k)
        self.gt.insert(ds.base[:self.n0], self.ids(np.arange(self.n0)))

    def ids(self, rows: np.ndarray) -> np.ndarray:
        """The current ids of base ``rows`` (never row numbers)."""
        return self.w.id_offset + self.gen[rows] * self.ds.n_base + rows

    @property
    def live(self) -> int:
        return len(self.live_rows)

    # --- writes (the writer thread only) ---------------------------------------------------
    def insert_batch(self, log_: WriterLog) -> None:
        m = min(self.w.batch, len(self.pool))
        if m == 0:
            log_.starved += 1
            return
        rows = np.array([self.pool.popleft() for _ in range(m)], dtype=np.int64)
        self.gen[rows] += 1
        ids = self.ids(rows)
        x = self.ds.base[rows]
        t0 = clock_ns()
        self.index.insert(x, ids)
        log_.insert_ns.append(clock_ns() - t0)
        self.gt.insert(x, ids)
        for r in rows.tolist():
            self.pos[r] = len(self.live_rows)
            self.live_rows.append(r)
        log_.inserted += m

    def delete_batch(self, log_: WriterLog) -> None:
        m = min(self.w.batch, self.live - self.k)
        if m <= 0:
            log_.starved += 1
            return
        pick = self.rng.choice(self.live, size=m, replace=False)
        rows = np.array([self.live_rows[i] for i in pick.tolist()], dtype=np.int64)
        ids = self.ids(rows)
        t0 = clock_ns()
        self.index.delete(ids)
        log_.delete_ns.append(clock_ns() - t0)
        self.gt.delete(ids)
        for r in rows.tolist():  # swap-remove from the live list
            i = self.pos.pop(r)
            last = self.live_rows.pop()
            if last != r:
                self.live_rows[i] = last
                self.pos[last] = i
            self.pool.append(r)
        log_.deleted += m

    def sample(self, t_s: float, log_: WriterLog) -> None:
        """Recall@k of the probe queries over the live set now (no write is in flight)."""
        res = self.index.search(self.probe, self.k)
        exact = self.gt.top().ids
        rec = per_query_recall(res.ids, exact, self.k, live=True)
        got = res.ids[res.ids >= 0]
        live_ids = self.ids(np.asarray(self.live_rows, dtype=np.int64))
        dead = int((~np.isin(got, live_ids)).sum())
        log_.samples.append(Sample(
            t_s, float(np.mean(rec)), float(np.percentile(rec, 5)),
            float((res.ids < 0).any(axis=1).mean()), dead, self.live, log_.inserted,
            log_.deleted))

    def run_writer(self, start_ns: int, end_ns: int, log_: WriterLog,
                   stop: threading.Event) -> None:
        """Insert / delete / sample on schedule from ``start_ns`` until ``end_ns``."""
        w = self.w
        nxt = {
            "insert": start_ns if w.insert_rate > 0 else None,
            "delete": start_ns if w.delete_rate > 0 else None,
            "sample": start_ns + int(w.recall_every_s * 1e9),
        }
        step = {"insert": int(w.batch / w.insert_rate * 1e9) if w.insert_rate > 0 else 0,
                "delete": int(w.batch / w.delete_rate * 1e9) if w.delete_rate > 0 else 0,
                "sample": int(w.recall_every_s * 1e9)}
        try:
            while not stop.is_set():
                kind, t = min(((k, v) for k, v in nxt.items() if v is not None),
                              key=lambda kv: kv[1])
                if t >= end_ns:
                    return
                rest = t - clock_ns()
                if rest > 0:
                    time.sleep(rest / 1e9)
                elif kind != "sample":
                    log_.lag_ns.append(-rest)
                if kind == "insert":
                    self.insert_batch(log_)
                elif kind == "delete":
                    self.delete_batch(log_)
                else:
                    self.sample((clock_ns() - start_ns) / 1e9, log_)
                nxt[kind] = t + step[kind]
        except Exception as exc:  # the point reports it; the searches go on to their end
            log_.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            log.warning("load writes: the writer stopped: %s", log_.error)


def writer_ms(ns: list[int], q: float) -> float | None:
    """The ``q`` percentile of per-call times ``ns`` (ns) in ms; None without calls."""
    return float(np.percentile(np.asarray(ns, dtype=np.float64), q) / 1e6) if ns else None


def timeline(rec: Any, samples: list[Sample], start_ns: int) -> list[dict[str, Any]]:
    """One entry per sample: the sample and the corrected p99 (ms) of the searches intended
    since the previous sample (measured window only)."""
    out = []
    t_int = (rec.intended - start_ns) / 1e9
    lat = (rec.done - rec.intended) / 1e6
    prev = 0.0
    for s in samples:
        sel = (t_int > prev) & (t_int <= s.t_s) & (rec.status != NOT_SENT)
        out.append({"t_s": s.t_s, "recall": s.recall, "recall_p5": s.recall_p5,
                    "short_of_k": s.short_of_k, "dead_returned": s.dead_returned,
                    "live": s.live, "inserted": s.inserted, "deleted": s.deleted,
                    "queries": int(sel.sum()),
                    "p99_ms": float(np.percentile(lat[sel], 99)) if sel.any() else None})
        prev = s.t_s
    return out


def writing_meets_slo(row: dict[str, Any], writer_error: str | None, p99_ms: float,
                      target_recall: float | None, max_error_rate: float) -> bool:
    """The SLO of a point searched while writing: judged on ``recall_min`` (the lowest recall
    sample of the measured window), never on the mean; a writer that failed fails the point."""
    judged = {**row, "recall": row.get("recall_min")}
    return bool(writer_error is None
                and meets_slo(judged, p99_ms, target_recall, max_error_rate))


@contextlib.contextmanager
def writing_target(opened: Any, knobs: dict[str, Any], ds: VectorDataset, spec: LoadSpec
                   ) -> Iterator[tuple[Churn, Target, dict[str, Any]]]:
    """Build the opened index on the initial rows, make room for the rest, and wrap it as the
    load's Target (recall is the writer's job: the searches' own score is NaN)."""
    from retrieval.bench.load.targets import query_rows
    from retrieval.indexes.entry import apply_search, check_search

    assert spec.writes is not None
    index, k = opened.index, spec.k
    require_writes(index, ("insert", "delete") if spec.writes.delete_rate > 0 else ("insert",))
    if ds.n_base <= k:
        raise ConfigError(f"{spec.source}: field 'writes' needs a dataset with more than k "
                          f"({k}) base rows; received {ds.n_base}")
    churn = Churn(index, ds, k, spec.writes, spec.seed)
    info = index.build(ds.base[:churn.n0], churn.ids(np.arange(churn.n0)))
    if isinstance(index, SupportsReserve):
        index.reserve(ds.n_base)
    apply_search(index, check_search(opened.cls, opened.build, dict(knobs), k,
                                     where=f"{spec.source}: writes"))
    rows = query_rows(ds, spec.queries)
    if isinstance(index, SupportsHotSearch):
        hot, _ = index.hot_search(k)

        def call(qi: int) -> Any:
            return hot(rows[qi])
    else:
        plain = index.search

        def call(qi: int) -> Any:
            return plain(rows[qi], k)

    def score(qi: int, raw: Any) -> float:
        return float("nan")

    facts = {"build_s_initial": info.build_s, "initial_rows": churn.n0,
             "probe_queries": int(churn.probe.shape[0]), "reserved": isinstance(
                 index, SupportsReserve), "hot_path": isinstance(index, SupportsHotSearch)}
    yield churn, Target(f"{index.name}-writes", len(rows), call, score), facts


def measure_writes(spec: LoadSpec, opened: Any, knobs: dict[str, Any], ds: VectorDataset,
                   label: str, note: Callable[[str], None], cpus: int
                   ) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Every searching-while-writing point of one config: (its summary, rows, timeline)."""
    w = spec.writes
    assert w is not None
    with writing_target(opened, knobs, ds, spec) as (churn, target, facts):
        from retrieval.bench.load.points import LoadPointRunner

        m = LoadPointRunner(spec, target, label, writes=churn, cpus=cpus)
        for r in w.rates:
            if m.aborted:
                break
            m.open(r)
            note(f"{label}: searching at {r:g} QPS while writing")
        cap: dict[str, Any] = {"capacity_qps": None, "first_fail_qps": None,
                               "limited_by": "not searched"}
        if w.search is not None and not m.aborted:
            s = w.search

            def measure(rate: float) -> dict[str, Any]:
                row = m.open(rate)
                note(f"{label}: capacity search while writing, {rate:.0f} QPS")
                return row

            res = search_capacity(measure, lambda row: bool(row["meets_slo"]),
                                  start_qps=s.start_qps, max_qps=s.max_qps, growth=s.growth,
                                  steps=s.steps, rel_tol=s.rel_tol)
            for mine, theirs in zip(m.rows[len(m.rows) - len(res.rows):], res.rows,
                                    strict=True):
                mine["search_step"] = theirs["search_step"]
            cap = {"capacity_qps": res.capacity_qps, "first_fail_qps": res.first_fail_qps,
                   "limited_by": res.limited_by}
        errors = [r["writer_error"] for r in m.rows if r["writer_error"]]
        summary = {**facts, **cap, "insert_rate": w.insert_rate, "delete_rate": w.delete_rate,
                   "batch": w.batch, "recall_every_s": w.recall_every_s,
                   "live_end": churn.live, "groundtruth": {
                       "recomputed_queries": churn.gt.stats.recomputed,
                       "inserted": churn.gt.stats.inserted, "deleted": churn.gt.stats.deleted},
                   "writer_errors": errors, "aborted": m.aborted,
                   "timeline": m.timelines}
    return summary, m.rows, m.timelines


__all__ = ["MODE", "Churn", "Sample", "WriterLog", "measure_writes", "timeline", "writer_ms",
           "writing_meets_slo", "writing_target"]
