"""The live part of the churn bench: one config through a resolved runbook.

The churn runner consumes the evaluation loop: every index is built through the loop's build
path (:meth:`retrieval.evaluation.Evaluator.build_on`: build threads, build cache, build log)
and every search step is measured by THE measurer (:meth:`retrieval.tune.measure.Measurer.at_step`)
against that step's exact truth, one point record per step. What is its own: the writes, the
control builds and the drift / damage split.

The index starts empty and is built on the first insert batch (an index cannot be built on zero
rows; never served by the build cache: it is written to); later writes go through
:class:`~retrieval.indexes.base.SupportsWrites` in batches of ``write_batch`` vectors, each call
timed. At a search step the queries are searched one at a time after a warm-up (timed:
p50/p95/p99 ms) with the configured search params and scored against the exact top-k of the
live set; at control steps a fresh index of the same build params is built on the live set (the
build cache may serve it) and probed in one batch pass; with ``retune`` the target search
(:func:`retrieval.tune.target.solve`) runs on the churned index (and on the control), batched
and untimed: the smallest knob value whose recall lower bound meets the target there.

:meth:`ConfigRun.replay` rebuilds the state of a killed run without measuring: the same writes
in the same order (a graph built with several threads may differ in its links).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.churn.logic import judged_damage, percentiles_ms, short_of_k, split
from retrieval.churn.spec import ChurnConfig, ChurnSpec
from retrieval.data import VectorDataset
from retrieval.evaluation import BuiltIndex, Evaluator, StepTruth
from retrieval.groundtruth.exact import GroundTruth
from retrieval.indexes.base import (
    SupportsDeadFraction,
    SupportsMemoryReport,
    SupportsWrites,
)
from retrieval.indexes.engine import local_server_of
from retrieval.indexes.entry import CheckedEntry, SearchConfig, check_entry
from retrieval.indexes.writes import require_writes
from retrieval.timing import clock_ns
from retrieval.tune.decide import QuerySplit
from retrieval.tune.measure import Measurer
from retrieval.tune.results import PointResult
from retrieval.tune.target import solve
from retrieval.workload.core import Step
from retrieval.workload.runbook import ResolvedRunbook

log = logging.getLogger(__name__)


@dataclass
class Searched:
    """What one search step found: the ids (nq, k) and the step's record."""

    ids: np.ndarray
    row: dict[str, Any]


@dataclass
class ConfigRun:
    """One config (``cfg``, its checked entry ``ce``) through ``book`` on ``ds``.

    Built and measured by the evaluation loop: its indexes through
    :meth:`~retrieval.evaluation.Evaluator.build_on` (the build path, build cache and build log
    of the sweep and ``rwb eval``), each search step through THE measurer
    (:meth:`~retrieval.tune.measure.Measurer.at_step`) against the step's exact truth; what is
    the churn runner's own: applying a step's writes to the live index, the control builds and
    the drift / damage split."""

    spec: ChurnSpec
    cfg: ChurnConfig
    label: str
    ds: VectorDataset
    queries: np.ndarray
    book: ResolvedRunbook
    truth: dict[int, GroundTruth]
    workdir: Path
    built: BuiltIndex | None = None
    live: dict[int, int] = field(default_factory=dict)  # caller id -> base row
    reference: float | None = None
    uri: str | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def __post_init__(self) -> None:
        field_ = f"configs[{self.spec.configs.index(self.cfg)}]"
        self.ce: CheckedEntry = check_entry(self.cfg, self.spec.k, where=self.spec.source,
                                            field=field_)
        (self.bp,) = self.ce.builds()
        self.search0: dict[str, Any] = dict(self.cfg.search)
        knobs = self.ce.cls.monotone_knobs_for(self.bp)
        self.knob: str | None = knobs[0] if knobs else None
        self.value: int | None = None
        self.knob_range: tuple[int, int] | None = None
        if self.knob:
            lo, hi = self.ce.cls.knob_range(self.knob, self.bp, self.spec.k)
            sp = self.ce.config(self.bp, self.search0).search
            self.value = int(getattr(sp, self.knob))
            cap = self.spec.knob_max or 16 * self.value
            self.knob_range = (lo, max(lo, min(hi, cap)))
        spec = self.spec
        # the churn queries are the dataset's first ones: positions 0..nq-1 of its query order
        self.ev = Evaluator(self.ds, spec.k, threads=spec.threads, seed=spec.seed,
                            warmup=spec.warmup, batch_repeats=1, workdir=self.workdir,
                            build_threads=spec.threads, eager_truth=False,
                            source="" if spec.source == "<memory>" else spec.source)
        nq = int(self.queries.shape[0])
        every = QuerySplit(np.arange(nq), np.arange(0), spec.seed)
        self.measurer = Measurer(self.ev, every, ("single",), spec.target_recall,
                                 spec.confidence, spec.seed)

    @property
    def index(self) -> Any:
        """The live index (None before the first insert)."""
        return None if self.built is None else self.built.index

    # --- index lifetime --------------------------------------------------------------------------
    def _options(self) -> dict[str, Any]:
        """The index's keyword arguments: a private server's ``uri`` (``server: true``)."""
        if self.cfg.server and (serve := local_server_of(self.cfg.backend)) is not None:
            if self.uri is None:
                self.uri = self._stack.enter_context(
                    serve(self.workdir / f"server-{self.label}", threads=self.spec.threads))
            return {"uri": self.uri}
        return {}

    def _build(self, tag: str, ids: np.ndarray, rows: np.ndarray, *, seed: int | None = None,
               cached: bool = True) -> BuiltIndex:
        """The config's index built on the base ``rows`` under ``ids`` (the loop's build path;
        ``cached``: whether the build cache may serve it: never for the index written to)."""
        x = np.asarray(self.ds.base[rows], dtype=np.float32)
        return self.ev.build_on(self.cfg.backend, self.bp, x, ids, seed=seed, cached=cached,
                                workdir=self.workdir / f"{self.label}-{tag}", **self._options())

    def check(self) -> None:
        """Refuse, in one line and before the run, a backend that cannot do the write steps."""
        require_writes(self.ce.cls, {s.op for s in self.book.steps})  # no server needed
        probe, _ = self.ev.new_index(self.cfg.backend, self.bp,
                                     workdir=self.workdir / f"{self.label}-probe",
                                     **self._options())
        try:
            require_writes(probe, {s.op for s in self.book.steps})
        finally:
            probe.close()

    def close(self) -> None:
        if self.built is not None:
            with contextlib.suppress(Exception):
                self.built.index.close()
            self.built = None
        self._stack.close()

    def __enter__(self) -> ConfigRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes ----------------------------------------------------------------------------------
    def _batches(self, n: int) -> Iterator[slice]:
        b = self.spec.write_batch
        for lo in range(0, n, b):
            yield slice(lo, min(n, lo + b))

    def _insert(self, ids: np.ndarray, rows: np.ndarray, timed: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.built is None:  # the first insert builds the index (never from the cache)
            self.built = self._build("main", ids, rows, cached=False)
            out = {"build_s": self.built.info.build_s, "built_n": int(ids.shape[0])}
        else:
            x = np.asarray(self.ds.base[rows], dtype=np.float32)
            ms = []
            t_all = clock_ns()
            for s in self._batches(ids.shape[0]):
                t0 = clock_ns()
                self.index.insert(x[s], ids[s])
                ms.append((clock_ns() - t0) / 1e6)
            secs = (clock_ns() - t_all) / 1e9
            if timed:
                out = {"insert_n": int(ids.shape[0]), "insert_s": secs,
                       "insert_per_s": ids.shape[0] / secs if secs > 0 else None,
                       **{f"insert_{k}": v for k, v in percentiles_ms(ms).items()}}
        self.live.update(zip(ids.tolist(), rows.tolist(), strict=True))
        return out

    def _delete(self, ids: np.ndarray, timed: bool) -> dict[str, Any]:
        ms = []
        t_all = clock_ns()
        for s in self._batches(ids.shape[0]):
            t0 = clock_ns()
            self.index.delete(ids[s])
            ms.append((clock_ns() - t0) / 1e6)
        secs = (clock_ns() - t_all) / 1e9
        for v in ids.tolist():
            del self.live[v]
        if not timed:
            return {}
        return {"delete_n": int(ids.shape[0]), "delete_s": secs,
                "delete_per_s": ids.shape[0] / secs if secs > 0 else None,
                **{f"delete_{k}": v for k, v in percentiles_ms(ms).items()}}

    def write(self, st: Step, *, timed: bool = True) -> dict[str, Any]:
        """Apply one write step (insert / delete / replace / maintain); its record."""
        if st.op == "insert":
            return self._insert(st.ids, st.rows, timed)
        if st.op == "delete":
            return self._delete(st.ids, timed)
        if st.op == "replace":
            return {**self._delete(st.ids, timed), **self._insert(st.ids, st.rows, timed)}
        if st.op == "maintain":
            info = self.index.maintain()
            return {"maintain_s": info.seconds, "maintain_action": info.action}
        raise AssertionError(st.op)  # pragma: no cover

    def replay(self, upto: int) -> None:
        """Apply every write step with index <= ``upto``, unmeasured (resume)."""
        for st in self.book.steps:
            if st.index > upto:
                break
            if st.op != "search":
                self.write(st, timed=False)

    # --- searches: THE measurer against the step's truth -----------------------------------------
    def _config(self, value: int | None) -> SearchConfig:
        search = dict(self.search0)
        if self.knob and value is not None:
            search[self.knob] = value
        return self.ce.config(self.bp, search)

    def _truth(self, st: Step) -> StepTruth:
        """The step's exact top-k (caller ids) and the live ids' base rows."""
        live = self.live

        def rows(ids: np.ndarray) -> np.ndarray:
            flat = [live.get(int(i), -1) for i in np.asarray(ids).ravel()]
            return np.asarray(flat, dtype=np.int64).reshape(np.shape(ids))

        return StepTruth(self.truth[st.index], rows)

    def _probe(self, built: BuiltIndex, value: int | None, truth: StepTruth) -> PointResult:
        """One untimed batch pass at ``value`` (recall, its lower bound, whether it meets)."""
        return self.measurer.at_step(built, self._config(value), truth, timed=False)[0]

    def _tuned(self, built: BuiltIndex, truth: StepTruth) -> int | None:
        if not (self.spec.retune and self.knob and self.knob_range
                and self.spec.target_recall is not None):
            return None
        lo, hi = self.knob_range
        out = solve(lo, hi, lambda v: bool(self._probe(built, v, truth).meets))
        return out.value

    def _control(self, truth: StepTruth) -> dict[str, Any]:
        """A fresh build of the live set (the run's seed), and a second one with the next seed:
        ``control_spread`` (recall fraction) is how far two builds of the same data differ (an
        IVF k-means or HNSW level seed alone moves recall), the uncertainty of damage. Both go
        through the loop's build path (the build cache may serve them: never written to)."""
        ids = np.fromiter(self.live.keys(), dtype=np.int64, count=len(self.live))
        rows = np.fromiter(self.live.values(), dtype=np.int64, count=len(self.live))
        ctl = self._build("control", ids, rows)
        try:
            p = self._probe(ctl, self.value, truth)
            out: dict[str, Any] = {"control_recall": p.recall, "control_lower": p.recall_lb,
                   "control_build_s": ctl.info.build_s,
                   "control_tuned_knob": self._tuned(ctl, truth)}
        finally:
            ctl.index.close()
        second = self._build("control-seed2", ids, rows, seed=self.spec.seed + 1)
        try:
            again = self._probe(second, self.value, truth).recall
        finally:
            second.index.close()
        out.update(control_recall_seed2=again,
                   control_spread=abs(p.recall - again))
        return out

    def search(self, st: Step, control: bool) -> Searched:
        """The search step ``st``: THE measurer's timed single-query pass (recall against the
        live set's exact top-k, p50/p95/p99 ms), results short of k, dead fraction, memory; the
        control and re-tune."""
        assert self.built is not None
        k = self.spec.k
        truth = self._truth(st)
        point, m = self.measurer.at_step(self.built, self._config(self.value), truth)
        assert m.ids is not None
        found = np.asarray(m.ids, dtype=np.int64)
        index = self.built.index
        row: dict[str, Any] = {
            "live": len(self.live),
            "recall": point.recall, "recall_p5": point.recall_p5,
            "recall_lower": point.recall_lb,
            "p50_ms": point.p50_ms, "p95_ms": point.p95_ms, "p99_ms": point.p99_ms,
            **short_of_k(found, k, len(self.live)),
            "dead_fraction": (index.dead_fraction()
                              if isinstance(index, SupportsDeadFraction) else None),
            "memory_bytes": (int(index.memory_bytes())
                             if isinstance(index, SupportsMemoryReport) else None),
            "live_count_index": (int(index.live_count())
                                 if isinstance(index, SupportsWrites) else None),
        }
        if self.reference is None:
            self.reference = row["recall"]
        row["reference_recall"] = self.reference
        row.update(self._control(truth) if control else
                   {"control_recall": None, "control_lower": None, "control_build_s": None,
                    "control_tuned_knob": None, "control_recall_seed2": None,
                    "control_spread": None})
        drift, damage = split(self.reference, row["control_recall"], row["recall"])
        # damage no larger than two fresh builds differ is no damage: reported as 0 (measured
        # value kept in damage_measured)
        reported, within = judged_damage(damage, row["control_spread"])
        row.update(drift=drift, damage=reported, damage_measured=damage,
                   damage_within_spread=within, tuned_knob=self._tuned(self.built, truth))
        return Searched(found, row)

    def probe_maintain(self, last: Step) -> tuple[str, float, float] | None:
        """Maintain once after the runbook and search again: (action, seconds, recall)."""
        assert self.built is not None
        info = self.index.maintain()
        return info.action, info.seconds, self._probe(self.built, self.value,
                                                      self._truth(last)).recall


def control_steps(book: ResolvedRunbook, rule: str) -> set[int]:
    """Indexes of the search steps that get a control (a step's own ``control`` wins)."""
    searches = [s for s in book.steps if s.op == "search"]
    out = set()
    for s in searches:
        if s.control is not None:
            if s.control:
                out.add(s.index)
            continue
        if rule == "every" or (rule in ("last", "marked") and s is searches[-1]):
            out.add(s.index)
    return out


__all__ = ["ConfigRun", "Searched", "control_steps"]
