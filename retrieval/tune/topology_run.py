"""``rwb sweep`` of a spec with ``topology:``: the knob per segment count (issue 31, item 1).

For each index entry, build config and segment count S in ``topology.segments``, the base is
split into S seeded segments (:func:`retrieval.tune.topology.split_rows`), each built as an
independent index of the entry's backend, and searched with the same knob; the per-segment top-k
are merged by distance. The sweep's own target search (:func:`retrieval.tune.target.solve`) over
the build's monotone knob finds the cheapest value whose recall lower bound on the tuning queries
meets the target; the held-out queries then give recall (mean, P5, lower bound) and single-query
p50/p95/p99 (ms) at that knob. Beside it: a per-segment knob rule (knob as a function of the
segment size N/S, fitted like the scale study's knob(N)), and with ``maintain`` the recall change
when the segments are force-merged into one graph searched at the same knob. Like a scale study
it keeps no Optuna study (not resumable).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.errors import BackendError, ConfigError
from retrieval.groundtruth.exact import ground_truth
from retrieval.indexes.base import SupportsNativeSegments
from retrieval.indexes.registry import create_index
from retrieval.phases import report
from retrieval.runs import WORKLOAD_TOPOLOGY, RunDir
from retrieval.stats.metrics import recall_by_id
from retrieval.tune import target as tgt
from retrieval.tune.decide import CHEAPEST_RULE, QuerySplit, lower_bound, split_queries
from retrieval.tune.measure import EPS
from retrieval.tune.runner import dataset_info
from retrieval.tune.spec import SweepSpec, checked_entries, resolved
from retrieval.tune.summary import SweepSummary
from retrieval.tune.topology import (
    NativeSegmented,
    SegmentedIndex,
    compare_segments,
    fit_segment_rule,
    split_rows,
)
from retrieval.tune.units import entry_labels, knob_bounds, monotone_knob, target_fixed_grid

log = logging.getLogger(__name__)

#: progress callback: (steps done, steps known, description)
Progress = Callable[[int, int, str], None]
#: N segments: independent indexes merged here, or an engine's own
Segmented = SegmentedIndex | NativeSegmented

RULE_NOTE = ("knob(n_seg) fitted on the topologies whose knob was found (log: a + b log2 n_seg; "
             "power: c n_seg^b; n_seg = N / segments), the model that best predicts the largest "
             "segment size from the smaller ones; each segment is searched with that knob and "
             "the segments' top-k merged by distance")


def check_topology_spec(spec: SweepSpec) -> None:
    """A topology study needs strategy target, a target recall, and no filters / scale."""
    if spec.target_recall is None:
        raise ConfigError(f"{spec.source}: a spec with 'topology' needs a target recall: set "
                          f"field 'target_recall' (in (0, 1]) or pass --target-recall")
    if spec.tune.strategy != "target":
        raise ConfigError(f"{spec.source}: field 'tune.strategy' must be target for a spec "
                          f"with 'topology'; received {spec.tune.strategy}")
    if spec.filters is not None or spec.scale is not None:
        raise ConfigError(f"{spec.source}: a spec with 'topology' cannot have 'filters' or "
                          f"'scale' (one workload dimension at a time)")


def _latencies_ms(index: Segmented, queries: np.ndarray, k: int, warmup: int) -> np.ndarray:
    """Single-query latency (ms) of each query, the merge included."""
    for q in queries[:warmup]:
        index.search(q[None, :], k)
    out = np.empty(len(queries), dtype=np.float64)
    for j, q in enumerate(queries):
        t0 = time.perf_counter_ns()
        index.search(q[None, :], k)
        out[j] = (time.perf_counter_ns() - t0) / 1e6
    return out


class TopologyStudy:
    """One topology study over a spec and its dataset."""

    def __init__(self, spec: SweepSpec, ds: VectorDataset, progress: Progress | None) -> None:
        assert spec.topology is not None and spec.target_recall is not None
        self.spec, self.ds, self.topo = spec, ds, spec.topology
        self.k, self.target = spec.k, float(spec.target_recall)
        self.progress = progress
        self.split: QuerySplit = split_queries(ds.n_queries, spec.tune.heldout_fraction,
                                               spec.seed)
        self.gt = ground_truth(ds, spec.k).ids[:, : spec.k]
        self.segments = [s for s in self.topo.segments if ds.n_base // s >= spec.k]
        self.skipped = [s for s in self.topo.segments if s not in self.segments]
        self.steps = 0

    def per_query(self, index: Segmented, rows: np.ndarray) -> np.ndarray:
        res = index.search(np.ascontiguousarray(self.ds.queries[rows]), self.k)
        return recall_by_id(res.ids, self.gt[rows], self.k)

    def set_knob(self, index: Segmented, fixed: dict[str, Any], knob: str, v: int) -> None:
        index.set_search_params(**{**fixed, knob: int(v)})

    def segmented(self, backend: str, build: Any, segments: int) -> Segmented:
        """S segments of ``backend``: the engine's own (native) where it has them and the spec
        allows, else S independent indexes whose top-k are merged here."""
        ds, spec = self.ds, self.spec
        index = create_index(backend, ds.dim, ds.metric, build, seed=spec.seed,
                             threads=spec.threads)
        if not (self.topo.native and isinstance(index, SupportsNativeSegments)):
            index.close()
        else:
            native = NativeSegmented(index, segments)
            try:
                native.build(ds.base)
            except BaseException:
                native.close()
                raise
            return native
        per_segment = 1 if segments > 1 else spec.threads  # threads go to the segments
        seg = SegmentedIndex(
            lambda: create_index(backend, ds.dim, ds.metric, build, seed=spec.seed,
                                 threads=per_segment),
            split_rows(ds.n_base, segments, spec.seed), workers=spec.threads)
        seg.build(ds.base)
        return seg

    def run_entry(self, i: int, label: str) -> list[dict[str, Any]]:
        checked = checked_entries(self.spec)[i]
        out: list[dict[str, Any]] = []
        for build in checked.build_grid:
            bp = checked.build(build)
            knob = monotone_knob(checked.cls, bp, self.k, self.spec.tune, label)
            if knob is None:
                raise ConfigError(f"{self.spec.source}: indexes[{i}] ({label}): backend "
                                  f"'{checked.backend}' has no monotone search knob for build "
                                  f"{build}, so a topology study has nothing to tune")
            low, high = knob_bounds(checked.cls, knob, bp, self.k, self.spec.tune)
            fixed = target_fixed_grid(self.spec, i, knob)[0]
            rows = [self.measure(checked.backend, bp, label, build, knob, fixed, s, low, high)
                    for s in self.segments]
            self.add_rule(rows, low, high)
            if self.topo.maintain:
                self.add_maintain(checked.backend, bp, knob, fixed, rows)
            out.extend(rows)
        return out

    def measure(self, backend: str, bp: Any, label: str, build: dict[str, Any], knob: str,
                fixed: dict[str, Any], segments: int, low: int, high: int) -> dict[str, Any]:
        conf, seed = self.spec.tune.confidence, self.spec.seed
        row: dict[str, Any] = {
            "label": label, "backend": backend, "build": build, "segments": segments,
            "segment_size": self.ds.n_base // segments, "knob_name": knob, "knob": None,
            "range": [low, high], "fixed": dict(fixed), "evaluations": 0, "build_s": None,
            "tuning_recall": None, "recall": None, "recall_p5": None, "recall_lower": None,
            "p50_ms": None, "p95_ms": None, "p99_ms": None,
        }
        try:
            seg = self.segmented(backend, bp, segments)
        except (ConfigError, BackendError) as exc:  # e.g. nlist > a segment's vectors
            row["message"] = f"{label} at {segments} segments: not built ({exc})"
            log.warning("%s", row["message"])
            return row
        try:
            probes: dict[int, tuple[float, float]] = {}

            def meets(v: int) -> bool:
                self.set_knob(seg, fixed, knob, v)
                pq = self.per_query(seg, self.split.tune)
                probes[v] = (float(pq.mean()), lower_bound(pq, self.k, conf, seed))
                self.steps += 1
                if self.progress:
                    self.progress(self.steps, 0, f"{label} segments={segments} {knob}={v} "
                                                 f"recall={probes[v][0]:.4f}")
                return probes[v][1] >= self.target - EPS

            found = tgt.solve(low, high, meets)
            row.update(knob=found.value, evaluations=found.evaluations, build_s=seg.build_s,
                       **_segmentation(seg))
            if found.value is None:
                row["message"] = (f"{label} at {segments} segments: the top of the {knob} range "
                                  f"({high}) misses recall@{self.k} {self.target:g}")
                return row
            self.set_knob(seg, fixed, knob, found.value)
            held = self.split.heldout if self.split.heldout.size else self.split.tune
            pq = self.per_query(seg, held)
            lat = _latencies_ms(seg, np.ascontiguousarray(self.ds.queries[held]), self.k,
                                min(self.spec.warmup, held.size))
            row.update({
                "tuning_recall": probes[found.value][0], "recall": float(pq.mean()),
                "recall_p5": float(np.percentile(pq, 5)),
                "recall_lower": lower_bound(pq, self.k, conf, seed),
                "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
                "p99_ms": float(np.percentile(lat, 99)),
            })
            if isinstance(seg, NativeSegmented) and self.topo.maintain and segments > 1:
                row["maintain"] = self.native_maintain(seg, held, row["recall"])
            return row
        finally:
            seg.close()

    def native_maintain(self, seg: NativeSegmented, held: np.ndarray,
                        before: float) -> dict[str, Any]:
        """The engine's own force-merge / optimize on the measured index, then the held-out
        recall again at the same knob."""
        done = seg.merge()
        after = float(self.per_query(seg, held).mean())
        return {"recall_before": before, "recall_after": after, "recall_change": after - before,
                **done}

    def add_rule(self, rows: list[dict[str, Any]], low: int, high: int) -> None:
        rule = fit_segment_rule(self.ds.n_base, [r["segments"] for r in rows],
                                [r["knob"] for r in rows])
        for r in rows:
            r["rule"] = None if rule is None else rule.to_dict()
            r["rule_knob"] = None if rule is None else rule.predict(r["segments"], low, high)

    def add_maintain(self, backend: str, bp: Any, knob: str, fixed: dict[str, Any],
                     rows: list[dict[str, Any]]) -> None:
        """Force-merge: the segments merged into one graph, searched at each topology's knob
        (held-out queries); the recall change is merged minus segmented."""
        todo = [r for r in rows if r["segments"] > 1 and r["knob"] is not None
                and "maintain" not in r]
        if not todo:
            return
        merged = self.segmented(backend, bp, 1)
        held = self.split.heldout if self.split.heldout.size else self.split.tune
        try:
            for r in todo:
                self.set_knob(merged, fixed, knob, r["knob"])
                after = float(self.per_query(merged, held).mean())
                r["maintain"] = {"recall_before": r["recall"], "recall_after": after,
                                 "recall_change": after - r["recall"],
                                 "step": "force-merge into one graph (rebuilt from all rows)"}
        finally:
            merged.close()

    def run(self) -> list[dict[str, Any]]:
        labels = entry_labels(self.spec)
        rows: list[dict[str, Any]] = []
        for i, label in enumerate(labels):
            report("topology study", i, len(labels), f"{label}: segments {self.segments}")
            rows.extend(self.run_entry(i, label))
        report("topology study", len(labels), len(labels), "done")
        return rows


def _segmentation(seg: Segmented) -> dict[str, Any]:
    """How the segments were made: ``segmented`` (native | shards), the engine's own count
    (``segments_reported``) and what its segments are."""
    if isinstance(seg, NativeSegmented):
        return {"segmented": "native", "segments_reported": seg.reported,
                "segments_note": seg.note}
    return {"segmented": "shards", "segments_reported": seg.segments,
            "segments_note": "independent indexes, each searched, top-k merged by distance"}


def run_topology_study(spec: SweepSpec, run: RunDir, ds: VectorDataset, ref: Any,
                       progress: Progress | None, started: float) -> dict[str, Any]:
    """Run the study into ``run`` and return its summary (a sweep summary with
    ``workload: topology`` and a ``topology`` list: one entry per label x build x segment
    count with ``segments``, ``knob``, ``recall_lower``, ...)."""
    check_topology_spec(spec)
    assert spec.topology is not None
    study = TopologyStudy(spec, ds, progress)
    run.write_yaml("spec.yaml", resolved(spec))
    run.write_manifest(kind=SweepSummary.KIND, seeds={"index": spec.seed,
                                                      "query_split": spec.seed,
                                                      "segments": spec.seed},
                       dataset={**dataset_info(ds), "ref": ref}, spec_source=spec.source,
                       topology={"segments": study.segments})
    rows = study.run()
    run.record_threads(spec.threads)
    messages = [r["message"] for r in rows if r.get("message")]
    messages += [f"{s} segments skipped: fewer than k={spec.k} vectors per segment"
                 for s in study.skipped]
    warning = compare_segments(study.segments, spec.topology.collection_segments, spec.source)
    summary = {
        "kind": SweepSummary.KIND, "workload": WORKLOAD_TOPOLOGY, "run_id": run.run_id,
        "name": spec.name, "dataset": ds.name, "dataset_fingerprint": ds.fingerprint,
        "metric": ds.metric, "k": spec.k, "strategy": "target",
        "target_recall": spec.target_recall, "objective": spec.tune.objective,
        "confidence": spec.tune.confidence.model_dump(), "queries": study.split.describe(),
        "recall_definition": "recall@k: |returned top-k ∩ exact top-k| / k (by id)",
        "latency_unit": "ms", "cheapest_rule": CHEAPEST_RULE, "evaluations": study.steps,
        "backends": {}, "builds": [], "rows": [], "pareto": [],
        "topology": rows,
        "topology_info": {"segments": study.segments, "n": ds.n_base, "rule": RULE_NOTE,
                          "collection_segments": spec.topology.collection_segments,
                          "segments_warning": warning, "messages": messages,
                          "wall_s": time.perf_counter() - started},
    }
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    return typed.to_json_dict()


__all__ = ["RULE_NOTE", "TopologyStudy", "check_topology_spec", "run_topology_study"]
