"""THE point runner of ``rwb bench load``: one offered-load point of one target at a time.

A point is a closed loop at a client count, or an open loop at an offered rate (QPS, with
coordinated-omission-corrected percentiles in ms); with ``writes`` (a :class:`~.writing.Churn`)
every open point runs beside the writer thread on the same index (mode ``open-writes``, see
:mod:`.writing`). The runner measures no recall of its own: each answer is scored by the target
(:func:`retrieval.evaluation.per_query_recall`, the evaluation loop's recall), the writer's
samples the same way against the live set's exact top-k. Every row is kept in :attr:`rows`.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np

from retrieval.bench.load.drivers import (
    LEAD_NS,
    LoopOptions,
    Target,
    closed_loop_asyncio,
    closed_loop_threads,
    open_loop_asyncio,
    open_loop_threads,
)
from retrieval.bench.load.spec import LoadSpec, OpenSpec, max_lag_us
from retrieval.bench.load.stats import meets_slo, schedule_offsets_ns, summarise_point
from retrieval.bench.load.writing import (
    MODE,
    Churn,
    WriterLog,
    timeline,
    writer_ms,
    writing_meets_slo,
)
from retrieval.timing import clock_ns


def loop_options(spec: LoadSpec) -> LoopOptions:
    """The spec's warm-up, measured duration and timeout (ns) and abort rule."""
    return LoopOptions(warmup_ns=int(spec.warmup_s * 1e9),
                       duration_ns=int((spec.duration_s - spec.warmup_s) * 1e9),
                       timeout_ns=int(spec.timeout_ms * 1e6), abort_errors=spec.abort_errors)


class LoadPointRunner:
    """Runs offered-load points of one target with the spec's client kind (see the module
    docstring); ``writes``: search while writing (threads, open points only)."""

    def __init__(self, spec: LoadSpec, target: Target, label: str,
                 factory: Any = None, tracing: Any = None, backend: str | None = None, *,
                 writes: Churn | None = None, cpus: int | None = None) -> None:
        self.spec, self.target, self.label, self.factory = spec, target, label, factory
        #: a :class:`retrieval.otel.Tracing` (None: off): one span per measured point
        self.tracing, self.backend = tracing, backend
        self.opt = loop_options(spec)
        self.rows: list[dict[str, Any]] = []
        #: the writer's recall samples of every point (``writes`` only)
        self.timelines: list[dict[str, Any]] = []
        self.aborted: str | None = None
        self.cpus = cpus or os.cpu_count() or 1
        self.writes = writes
        #: the client kind used (processes need a factory: a target built in each child; the
        #: writer shares its index with threads)
        self.client = "threads" if writes is not None else (
            spec.client if spec.client != "processes" or factory else "threads")

    def _row(self, rec: Any, mode: str, extra: dict[str, Any],
             span_ns: tuple[int, int] = (0, 0)) -> dict[str, Any]:
        s = self.spec
        row = {"config": self.label, "client": self.client, **extra,
               **summarise_point(rec, mode=mode, closed=mode == "closed",
                                 max_lag_us=max_lag_us(s), timeout_ms=s.timeout_ms,
                                 cpu_count=self.cpus)}
        row["meets_slo"] = meets_slo(row, s.slo.p99_ms, s.slo.target_recall,
                                     s.slo.max_error_rate)
        if rec.aborted and self.aborted is None:
            self.aborted = f"config '{self.label}', {mode} point: {rec.aborted}"
        if self.tracing is not None:
            self._span(row, span_ns)
        self.rows.append(row)
        return row

    def _span(self, row: dict[str, Any], span_ns: tuple[int, int]) -> None:
        """One span for the measured point (its batch of searches), made after it ran."""
        from retrieval.otel import OP

        keys = ("mode", "clients", "offered_qps", "achieved_qps", "p50_ms", "p95_ms", "p99_ms",
                "p99_ms_uncorrected", "recall", "errors", "timeouts", "meets_slo", "arrival")
        sp = self.tracing.span(
            f"retrieval {self.label}", span_ns[0], span_ns[1],
            {OP: "retrieval", "gen_ai.data_source.id": self.label,
             "gen_ai.request.top_k": self.spec.k, "rwb.backend": self.backend,
             "rwb.client": self.client, "rwb.bench": "load",
             **{f"rwb.{k}": row.get(k) for k in keys}})
        row["trace_id"] = self.tracing.trace_id(sp)

    def closed(self, clients: int) -> dict[str, Any]:
        """A closed loop of ``clients`` clients; its row."""
        s = self.spec
        t0 = time.perf_counter_ns()
        if self.client == "processes":
            from retrieval.bench.load.procs import closed_loop_processes

            rec = closed_loop_processes(self.factory, clients, s.processes, self.opt)
        elif self.client == "asyncio":
            rec = closed_loop_asyncio(self.target, clients, self.opt)
        else:
            rec = closed_loop_threads(self.target, clients, self.opt)
        return self._row(rec, "closed", {"clients": clients, "offered_qps": None},
                         (t0, time.perf_counter_ns()))

    def open(self, rate: float) -> dict[str, Any]:
        """An open loop at ``rate`` QPS (beside the writer with ``writes``); its row."""
        if self.writes is not None:
            return self._open_writing(rate, self.writes)
        s = self.spec
        assert s.open is not None
        offsets = schedule_offsets_ns(rate, s.duration_s, s.open.arrival,
                                      seed=s.seed + len(self.rows))
        t0 = time.perf_counter_ns()
        if self.client == "processes":
            from retrieval.bench.load.procs import open_loop_processes

            rec = open_loop_processes(self.factory, offsets, s.open.clients, s.processes,
                                      self.opt)
        elif self.client == "asyncio":
            rec = open_loop_asyncio(self.target, offsets, s.open.clients, self.opt)
        else:
            rec = open_loop_threads(self.target, offsets, s.open.clients, self.opt)
        return self._row(rec, "open", {"clients": s.open.clients, "offered_qps": float(rate),
                                       "arrival": s.open.arrival}, (t0, time.perf_counter_ns()))

    def _open_writing(self, rate: float, churn: Churn) -> dict[str, Any]:
        """An open loop at ``rate`` QPS while the writer inserts, deletes and samples recall
        on the same index (:mod:`.writing`); its row (mode ``open-writes``)."""
        s, w = self.spec, self.spec.writes
        assert w is not None
        open_ = s.open or OpenSpec(search=None)
        offsets = schedule_offsets_ns(rate, s.duration_s, open_.arrival,
                                      seed=s.seed + 7919 + len(self.rows))
        start = clock_ns() + LEAD_NS
        end = start + int(s.duration_s * 1e9)
        wlog = WriterLog()
        stop = threading.Event()
        live0 = churn.live
        writer = threading.Thread(target=churn.run_writer, args=(start, end, wlog, stop),
                                  name="rwb-load-writer", daemon=True)
        writer.start()
        try:
            rec = open_loop_threads(self.target, offsets, open_.clients, self.opt,
                                    start_ns=start)
        finally:
            writer.join(timeout=max(0.0, (end - clock_ns()) / 1e9) + 1.0)
            stop.set()  # a writer still inside a call finishes it, then stops
            writer.join()
        row = {"config": self.label, "client": "threads", "clients": open_.clients,
               "offered_qps": float(rate), "arrival": open_.arrival,
               **summarise_point(rec, mode=MODE, closed=False, max_lag_us=max_lag_us(s),
                                 timeout_ms=s.timeout_ms, cpu_count=self.cpus)}
        window = [x for x in wlog.samples if x.t_s >= s.warmup_s]
        secs = s.duration_s
        row.update({
            "insert_rate": w.insert_rate, "delete_rate": w.delete_rate, "write_batch": w.batch,
            "insert_achieved": wlog.inserted / secs, "delete_achieved": wlog.deleted / secs,
            "inserted": wlog.inserted, "deleted": wlog.deleted,
            "insert_p50_ms": writer_ms(wlog.insert_ns, 50),
            "insert_p99_ms": writer_ms(wlog.insert_ns, 99),
            "delete_p50_ms": writer_ms(wlog.delete_ns, 50),
            "delete_p99_ms": writer_ms(wlog.delete_ns, 99),
            "writer_lag_p99_ms": writer_ms(wlog.lag_ns, 99), "inserts_starved": wlog.starved,
            "live_start": live0, "live_end": churn.live,
            "recall": float(np.mean([x.recall for x in window])) if window else None,
            "recall_min": min((x.recall for x in window), default=None),
            "recall_samples": len(window),
            "dead_returned": int(sum(x.dead_returned for x in wlog.samples)),
            "writer_error": wlog.error,
        })
        row["meets_slo"] = writing_meets_slo(row, wlog.error, s.slo.p99_ms,
                                             s.slo.target_recall, s.slo.max_error_rate)
        if rec.aborted and self.aborted is None:
            self.aborted = f"config '{self.label}', {MODE} point: {rec.aborted}"
        point = len(self.rows)
        row["point"] = point
        self.rows.append(row)
        self.timelines += [{"config": self.label, "point": point, "offered_qps": float(rate),
                            **t} for t in timeline(rec, wlog.samples, start)]
        return row


__all__ = ["LoadPointRunner", "loop_options"]
