"""The live part of the churn bench: one config through a resolved runbook.

The index starts empty and is built on the first insert batch (an index cannot be built on zero
rows); later writes go through :class:`~retrieval.indexes.base.SupportsWrites` in batches of
``write_batch`` vectors, each call timed. At a search step the queries are searched one at a
time (timed: p50/p95/p99 ms) with the configured search params and scored against the exact
top-k of the live set; at control steps a fresh index of the same build params is built on the
live set and searched the same way; with ``retune`` the target search
(:func:`retrieval.tune.target.solve`) runs on the churned index (and on the control), batched
and untimed: the smallest knob value whose recall lower bound meets the target there.

:meth:`ConfigRun.replay` rebuilds the state of a killed run without measuring: the same writes
in the same order (a graph built with several threads may differ in its links).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.churn.logic import live_recall, percentiles_ms, recall_stats, short_of_k, split
from retrieval.churn.spec import ChurnConfig, ChurnSpec
from retrieval.data import VectorDataset
from retrieval.groundtruth.exact import GroundTruth
from retrieval.indexes.base import (
    SupportsDeadFraction,
    SupportsMemoryReport,
    SupportsWrites,
)
from retrieval.indexes.engine import local_server_of
from retrieval.indexes.entry import CheckedEntry, apply_search, check_entry
from retrieval.indexes.writes import require_writes
from retrieval.timing import clock_ns, time_each, warm_up
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
    """One config (``cfg``, its checked entry ``ce``) through ``book`` on ``ds``."""

    spec: ChurnSpec
    cfg: ChurnConfig
    label: str
    ds: VectorDataset
    queries: np.ndarray
    book: ResolvedRunbook
    truth: dict[int, GroundTruth]
    workdir: Path
    index: Any = None
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

    # --- index lifetime --------------------------------------------------------------------------
    def _new_index(self, tag: str, seed: int | None = None) -> Any:
        kwargs: dict[str, Any] = {}
        if self.cfg.server and (serve := local_server_of(self.cfg.backend)) is not None:
            if self.uri is None:
                self.uri = self._stack.enter_context(
                    serve(self.workdir / f"server-{self.label}", threads=self.spec.threads))
            kwargs["uri"] = self.uri
        return self.ce.cls(self.ds.dim, self.ds.metric, self.bp,
                           seed=self.spec.seed if seed is None else seed,
                           threads=self.spec.threads, workdir=self.workdir / f"{self.label}-{tag}",
                           **kwargs)

    def check(self) -> None:
        """Refuse, in one line and before the run, a backend that cannot do the write steps."""
        require_writes(self.ce.cls, {s.op for s in self.book.steps})  # no server needed
        probe = self._new_index("probe")
        try:
            require_writes(probe, {s.op for s in self.book.steps})
        finally:
            probe.close()

    def close(self) -> None:
        if self.index is not None:
            with contextlib.suppress(Exception):
                self.index.close()
            self.index = None
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
        x = np.asarray(self.ds.base[rows], dtype=np.float32)
        out: dict[str, Any] = {}
        if self.index is None:  # the first insert builds the index
            self.index = self._new_index("main")
            info = self.index.build(x, ids)
            out = {"build_s": info.build_s, "built_n": int(ids.shape[0])}
        else:
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

    # --- searches --------------------------------------------------------------------------------
    def _use(self, index: Any, value: int | None) -> None:
        search = dict(self.search0)
        if self.knob and value is not None:
            search[self.knob] = value
        apply_search(index, self.ce.config(self.bp, search))

    def _meets(self, index: Any, exact: np.ndarray, target: float) -> Callable[[int], bool]:
        def meets(v: int) -> bool:
            self._use(index, v)
            found = index.search(self.queries, self.spec.k).ids
            per = live_recall(found, exact, self.spec.k)
            return recall_stats(per, self.spec.k, self.spec.confidence,
                                self.spec.seed)["recall_lower"] >= target

        return meets

    def _tuned(self, index: Any, exact: np.ndarray) -> int | None:
        if not (self.spec.retune and self.knob and self.knob_range
                and self.spec.target_recall is not None):
            return None
        lo, hi = self.knob_range
        out = solve(lo, hi, self._meets(index, exact, self.spec.target_recall))
        self._use(index, self.value)
        return out.value

    def _control(self, exact: np.ndarray) -> dict[str, Any]:
        """A fresh build of the live set (the run's seed), and a second one with the next seed:
        ``control_spread`` (recall fraction) is how far two builds of the same data differ (an
        IVF k-means or HNSW level seed alone moves recall), the uncertainty of damage."""
        ids = np.fromiter(self.live.keys(), dtype=np.int64, count=len(self.live))
        rows = np.fromiter(self.live.values(), dtype=np.int64, count=len(self.live))
        x = np.asarray(self.ds.base[rows], dtype=np.float32)
        ctl = self._new_index("control")
        try:
            info = ctl.build(x, ids)
            self._use(ctl, self.value)
            found = ctl.search(self.queries, self.spec.k).ids
            st = recall_stats(live_recall(found, exact, self.spec.k), self.spec.k,
                              self.spec.confidence, self.spec.seed)
            out = {"control_recall": st["recall"], "control_lower": st["recall_lower"],
                   "control_build_s": info.build_s,
                   "control_tuned_knob": self._tuned(ctl, exact)}
        finally:
            ctl.close()
        second = self._new_index("control-seed2", seed=self.spec.seed + 1)
        try:
            second.build(x, ids)
            self._use(second, self.value)
            again = float(live_recall(second.search(self.queries, self.spec.k).ids, exact,
                                      self.spec.k).mean())
        finally:
            second.close()
        out.update(control_recall_seed2=again,
                   control_spread=abs(float(out["control_recall"]) - again))
        return out

    def search(self, st: Step, control: bool) -> Searched:
        """The search step ``st``: timed single-query searches, recall against the live set's
        exact top-k, results short of k, dead fraction, memory; the control and re-tune."""
        k = self.spec.k
        exact = self.truth[st.index].ids
        self._use(self.index, self.value)
        qs = [self.queries[i:i + 1] for i in range(self.queries.shape[0])]
        warm_up(lambda q: self.index.search(q, k), qs, self.spec.warmup)
        res, ms = time_each(lambda q: self.index.search(q, k), qs)
        found = np.vstack([r.ids[:, :k] if r.ids.shape[1] >= k else
                           np.pad(r.ids, ((0, 0), (0, k - r.ids.shape[1])),
                                  constant_values=-1) for r in res]).astype(np.int64)
        per = live_recall(found, exact, k)
        row: dict[str, Any] = {
            "live": len(self.live),
            **recall_stats(per, k, self.spec.confidence, self.spec.seed),
            **percentiles_ms(ms), **short_of_k(found, k, len(self.live)),
            "dead_fraction": (self.index.dead_fraction()
                              if isinstance(self.index, SupportsDeadFraction) else None),
            "memory_bytes": (int(self.index.memory_bytes())
                             if isinstance(self.index, SupportsMemoryReport) else None),
            "live_count_index": (int(self.index.live_count())
                                 if isinstance(self.index, SupportsWrites) else None),
        }
        if self.reference is None:
            self.reference = row["recall"]
        row["reference_recall"] = self.reference
        row.update(self._control(exact) if control else
                   {"control_recall": None, "control_lower": None, "control_build_s": None,
                    "control_tuned_knob": None, "control_recall_seed2": None,
                    "control_spread": None})
        drift, damage = split(self.reference, row["control_recall"], row["recall"])
        spread = row["control_spread"]
        # damage no larger than two fresh builds differ is no damage: reported as 0 (measured
        # value kept in damage_measured)
        within = damage is not None and spread is not None and abs(damage) <= spread
        row.update(drift=drift, damage=0.0 if within else damage, damage_measured=damage,
                   damage_within_spread=within if damage is not None else None,
                   tuned_knob=self._tuned(self.index, exact))
        return Searched(found, row)

    def probe_maintain(self, last: Step) -> tuple[str, float, float] | None:
        """Maintain once after the runbook and search again: (action, seconds, recall)."""
        info = self.index.maintain()
        self._use(self.index, self.value)
        found = self.index.search(self.queries, self.spec.k).ids
        per = live_recall(found, self.truth[last.index].ids, self.spec.k)
        return info.action, info.seconds, float(per.mean())


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
