"""``rwb sweep`` of a spec with ``scale:``: the live part of a scale study (ef(N)).

For each sample size (seeded nested samples of the base, :func:`retrieval.tune.scale.nested_rows`;
the same tuning / held-out query split at every size) and each build config of the spec, the
target search (:func:`retrieval.tune.target.solve`, the sweep's own) finds the cheapest value of
the build's monotone knob (read from the backend: ``monotone_knobs_for``). Its first probe is
the top of the knob range: the build's *ceiling*; when that lower bound misses the target the
build's search stops there, at this size and every larger one (the summary says so in one line).

The knob is then fitted against N (:mod:`retrieval.tune.scale`), predicted at the full N, and
each build that still reaches the target is built ONCE at the full N, where rwb measures its
ceiling, the predicted knob (tuning bound and held-out recall), the exact cheapest knob near it
(a short local search), the recall the largest sample's knob gives there, and the transfer
error. Like a filtered sweep, a scale study keeps no Optuna study (not resumable).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.data import VectorDataset, take_rows
from retrieval.errors import ConfigError
from retrieval.evaluation import BuiltIndex, Evaluator
from retrieval.groundtruth.exact import GroundTruth, ground_truth
from retrieval.ids import CallerIds
from retrieval.indexes.base import (
    SupportsBuildThreads,
    SupportsCoarsePartition,
    SupportsSharedTraining,
    available_cpus,
)
from retrieval.indexes.entry import CheckedEntry
from retrieval.indexes.trained import TrainedStore
from retrieval.phases import report
from retrieval.runs import RunDir
from retrieval.tune import scale as sc
from retrieval.tune import scale_cells as cells
from retrieval.tune import scale_partition as sp
from retrieval.tune import scale_trust as st
from retrieval.tune import target as tgt
from retrieval.tune.config import measures_resident
from retrieval.tune.decide import QuerySplit, lower_bound
from retrieval.tune.measure import EPS, Measurer, attach_memory_report
from retrieval.tune.results import PointResult
from retrieval.tune.runner import dataset_info
from retrieval.tune.scale_difficulty import lid_feature, predict_difficulty
from retrieval.tune.scale_summary import RULE_NOTE, scale_summary, used_model
from retrieval.tune.scale_surface import predict_surface
from retrieval.tune.spec import SweepSpec, checked_entries, resolved
from retrieval.tune.summary import SweepSummary
from retrieval.tune.units import entry_labels, knob_bounds, monotone_knob, target_fixed_grid

log = logging.getLogger(__name__)

#: progress callback: (steps done, steps known, description)
Progress = Callable[[int, int, str], None]



def sample_ground_truth(ds: VectorDataset, k: int) -> GroundTruth:
    """Exact ground truth of one sample (or of the full base): THE place a scale study gets it
    (cached by the sample's fingerprint, so a re-run reuses it; an out-of-core computation can
    replace this function)."""
    return ground_truth(ds, k)


def sample_dataset(ds: VectorDataset, rows: np.ndarray) -> VectorDataset:
    """The base rows ``rows`` of ``ds`` with all its queries (positions in the sample; the
    caller's ids of those rows, when the dataset has them)."""
    return VectorDataset(name=f"{ds.name}[{rows.size} of {ds.n_base}]",
                         base=take_rows(ds.base, rows), queries=ds.queries, metric=ds.metric,
                         source=ds.source, info={"sample_of": ds.fingerprint,
                                                 "sample_size": int(rows.size)},
                         base_ids=None if ds.base_ids is None else CallerIds(
                             ds.base_ids.ids[rows]),
                         query_ids=ds.query_ids)


@dataclass(frozen=True)
class Probe:
    value: int
    recall: float
    recall_lb: float
    per_query: np.ndarray
    qps: float  # queries/s of the batch pass

    def meets(self, target: float) -> bool:
        return bool(self.recall_lb >= target - EPS)


class Study:
    """One scale study over a spec and its dataset."""

    def __init__(self, spec: SweepSpec, ds: VectorDataset, progress: Progress | None) -> None:
        assert spec.scale is not None and spec.target_recall is not None
        self.spec, self.ds, self.scale = spec, ds, spec.scale
        self.target = float(spec.target_recall)
        self.k = spec.k
        self.progress = progress
        self.checked = checked_entries(spec)
        self.labels = entry_labels(spec)
        try:
            self.sizes = sc.sample_sizes(self.scale, ds.n_base, spec.k)
        except ValueError as exc:
            raise ConfigError(f"{spec.source}: field 'scale': {exc}") from None
        self.split = _split(spec, ds)
        self.builds = self._plan()
        self.timing = {"samples_s": 0.0, "full_s": 0.0, "groundtruth_s": 0.0,
                       "full_groundtruth_s": 0.0, "partition_s": 0.0}
        self.answer: int | None = None
        self.steps = 0
        #: scale.sampling neighbourhood: the width h and the core's rows
        self.neighbourhood: dict[str, int] | None = None
        #: scale.sampling cells: C, the rule, per sample the cells and tuning queries judged
        self.cells: dict[str, Any] | None = None
        #: sample size -> positions (in the tuning queries) it judges (cells; others: all)
        self.judged: dict[int, np.ndarray] = {}
        self.repeat_evaluations = 0  # probes of the repeated builds of the current sample
        #: exact k-NN distances of the tuning queries at each size (the difficulty model's LID)
        self.kdist: dict[int, np.ndarray] = {}
        self._full_gt: GroundTruth | None = None
        #: quantizers the partition model trained on the full N's build rows (the full-N
        #: evaluator's builds take them instead of training again)
        self.quantizers = TrainedStore(None, ds.fingerprint)

    # --- planning ----------------------------------------------------------------------------
    def build_at(self, checked: CheckedEntry, build: dict[str, Any], n: int) -> dict[str, Any]:
        """The build config at ``n`` base vectors: each build rule of a param this backend has
        replaces the spec's value."""
        fields = checked.cls.BuildParams.model_fields
        ruled = {p: sc.rule_value(r, n) for p, r in self.scale.build_rules.items() if p in fields}
        return {**build, **ruled}

    def _plan(self) -> list[sc.BuildStudy]:
        out = []
        unused = set(self.scale.build_rules)
        for i, checked in enumerate(self.checked):
            unused -= set(checked.cls.BuildParams.model_fields)
            for build in checked.build_grid:
                bp = checked.build(self.build_at(checked, build, self.ds.n_base))
                knob = monotone_knob(checked.cls, bp, self.k, self.spec.tune, self.labels[i])
                if knob is None:
                    raise ConfigError(
                        f"{self.spec.source}: indexes[{i}] ({self.labels[i]}): backend "
                        f"'{checked.backend}' has no monotone search knob for build {build}, "
                        f"so a scale study cannot fit one against N")
                for fixed in target_fixed_grid(self.spec, i, knob):
                    out.append(sc.BuildStudy(self.labels[i], checked.backend, dict(build),
                                             fixed, knob))
        if unused:
            raise ConfigError(f"{self.spec.source}: field 'scale.build_rules': "
                              f"'{sorted(unused)[0]}' is not a build param of any index entry")
        return out

    def _entry(self, b: sc.BuildStudy) -> CheckedEntry:
        return self.checked[self.labels.index(b.label)]

    def bounds(self, b: sc.BuildStudy, n: int) -> tuple[dict[str, Any], int, int]:
        """The build at ``n`` and its knob range there."""
        checked = self._entry(b)
        build = self.build_at(checked, b.build, n)
        low, high = knob_bounds(checked.cls, b.knob, checked.build(build), self.k,
                                self.spec.tune)
        return build, low, high

    # --- measuring ---------------------------------------------------------------------------
    def probe(self, m: Measurer, built: BuiltIndex, b: sc.BuildStudy, build: dict[str, Any],
              value: int, cache: dict[int, Probe]) -> Probe:
        """One batch pass over the tuning queries at knob ``value``, through the sweep's
        :class:`~retrieval.tune.measure.Measurer` (remembered in ``cache``)."""
        if value in cache:
            return cache[value]
        config = self._entry(b).config(build, {**b.fixed, b.knob: int(value)})
        point, per_query = m.probe_per_query(built, config)
        p = Probe(int(value), point.recall, point.recall_lb, per_query, float(point.qps or 0.0))
        cache[value] = p
        self.steps += 1
        if self.progress:
            self.progress(self.steps, 0, f"{b.label} N={m.ev.ds.n_base:,} probe "
                          f"{b.knob}={value} "
                          f"recall={p.recall:.4f} lb={p.recall_lb:.4f}")
        return p

    def measurer(self, ev: Evaluator) -> Measurer:
        """The sweep's measurer over ``ev`` (a sample's or the full N's): on the tuning queries
        the sample judges (``sampling: cells``; every one otherwise)."""
        split = self.split
        pos = self.judged.get(ev.ds.n_base)
        if pos is not None and ev.ds.n_base != self.ds.n_base:
            split = QuerySplit(self.split.tune[pos], self.split.heldout, self.split.seed)
        return Measurer(ev, split, self.spec.modes, self.target,
                        self.spec.tune.confidence, self.spec.seed)

    def ground_truth(self, ds: VectorDataset) -> GroundTruth:
        """The exact ground truth of a sample or of the full N (computed once for the full N:
        the difficulty model reads its distances before the check at full N uses it)."""
        full = ds.n_base == self.ds.n_base
        if full and self._full_gt is not None:
            return self._full_gt
        t0 = time.perf_counter()
        gt = sample_ground_truth(ds, self.k)
        spent = time.perf_counter() - t0
        self.timing["groundtruth_s"] += spent
        if full:
            self.timing["full_groundtruth_s"] += spent
            self._full_gt = gt
        self.kdist[ds.n_base] = gt.distances[self.split.tune, :self.k]
        return gt

    def evaluator(self, ds: VectorDataset) -> Evaluator:
        return Evaluator.for_spec(self.spec, ds, None, gt=self.ground_truth(ds))

    def lid(self, n: int) -> np.ndarray | None:
        """The tuning queries' log LID at size ``n`` (None: inner product, or not measured)."""
        if n == self.ds.n_base and n not in self.kdist:
            self.ground_truth(self.ds)  # the full N's, which the check computes anyway
        d = self.kdist.get(n)
        return None if d is None else lid_feature(d, self.ds.metric, self.k)

    # --- samples -----------------------------------------------------------------------------
    def sample_rows(self) -> list[np.ndarray]:
        """The rows of each sample: uniform nested samples, or the tuning queries' full-N
        neighbourhoods plus a uniform fill (``scale.sampling: neighbourhood``)."""
        if self.scale.sampling == "uniform":
            return sc.nested_rows(self.ds.n_base, self.sizes, self.spec.seed)
        if self.scale.sampling == "cells":
            return self.cell_rows()
        width = min(max(sc.NEIGHBOURHOOD_H), self.ds.n_base)
        t0 = time.perf_counter()
        gt = sample_ground_truth(self.ds, width)  # the full N, cached by fingerprint
        spent = time.perf_counter() - t0
        self.timing["groundtruth_s"] += spent
        self.timing["full_groundtruth_s"] += spent
        rows, h = sc.neighbourhood_rows(self.ds.n_base, self.sizes, self.spec.seed,
                                        gt.ids[self.split.tune])
        core = int(np.unique(gt.ids[self.split.tune][:, :h]).size) if h else 0
        self.neighbourhood = {"h": h, "core_rows": core}
        if h == 0:
            log.warning("scale.sampling neighbourhood: even the %d nearest neighbours of the "
                        "tuning queries do not fit in half the smallest sample (%d rows): the "
                        "samples are uniform", min(sc.NEIGHBOURHOOD_H), min(self.sizes))
        return rows

    def cell_rows(self) -> list[np.ndarray]:
        """``sampling: cells``: whole k-means cells per sample (the sizes become the samples'
        own), each judging the tuning queries whose full-N k nearest lie in its cells (the
        full-N ground truth: computed once, the check at the full N reuses it)."""
        gt = self.ground_truth(self.ds)
        t0 = time.perf_counter()
        try:
            plan = cells.plan_cells(self.ds, self.sizes, self.spec.seed, self.split.tune,
                                    gt.ids[self.split.tune, :self.k], cells.QUERY_RULE)
        except ValueError as exc:
            raise ConfigError(f"{self.spec.source}: field 'scale.sampling': cells: {exc}; "
                              f"give fewer or more distant sample sizes") from None
        self.timing["samples_s"] += time.perf_counter() - t0
        self.sizes = [int(r.size) for r in plan.rows]
        self.judged = {int(r.size): q for r, q in zip(plan.rows, plan.queries, strict=True)}
        self.cells = {**plan.summary, "kmeans_s": time.perf_counter() - t0}
        return plan.rows

    def run_samples(self) -> None:
        rows = self.sample_rows()
        stages = len(self.sizes) + 1  # the samples, then the check at full N
        for j, (n, idx) in enumerate(zip(self.sizes, rows, strict=True)):
            live = [b for b in self.builds if b.stopped is None]
            if not live:
                break
            report("scale study", j, stages, f"sample N={n:,} ({len(live)} builds)")
            sds = sample_dataset(self.ds, idx)
            t0 = time.perf_counter()
            with self.evaluator(sds) as ev:
                for b in live:
                    self.tune_sample(ev, b, n)
            self.timing["samples_s"] += time.perf_counter() - t0

    def tune_sample(self, ev: Evaluator, b: sc.BuildStudy, n: int) -> None:
        build, low, high = self.bounds(b, n)
        t0 = time.perf_counter()
        built = ev.build(b.backend, self._entry(b).build(build))
        build_s = time.perf_counter() - t0
        cache: dict[int, Probe] = {}
        m = self.measurer(ev)
        out = tgt.solve(low, high, lambda v: self.probe(m, built, b, build, v, cache)
                        .meets(self.target))
        ev.release(built)
        top = cache[high]
        row: dict[str, Any] = {
            "n": n, "build": build, "low": low, "high": high, "knob": out.value,
            "ceiling": top.recall_lb, "ceiling_recall": top.recall,
            "qps": None if out.value is None else cache[out.value].qps,
            "evaluations": out.evaluations, "build_s": build_s,
            "search_s": time.perf_counter() - t0 - build_s,
        }
        if out.value is not None and not st.seeded(self._entry(b).cls, ev.build_threads):
            row["knob_repeats"] = [out.value, *self.repeat_builds(ev, b, build, low, high)]
            row["knob"] = st.median_knob(row["knob_repeats"])
            row["evaluations"] += self.repeat_evaluations
            self.repeat_evaluations = 0
        if out.value is None:  # the top of the range misses: stop this build here
            b.stopped = sc.ceiling_message(self.k, self.target, build, n, top.recall_lb,
                                           hint=sc.raise_hint(b.build, list(b.build)))
            row["stopped"] = b.stopped
            log.info("%s", b.stopped)
        else:
            values = sorted(cache)
            b.curves.append(sc.Curve(
                n, tuple(values), np.stack([cache[v].per_query for v in values]),
                tuple(cache[v].recall - cache[v].recall_lb for v in values), high,
                self.judged.get(n)))
        b.samples.append(row)

    def repeat_builds(self, ev: Evaluator, b: sc.BuildStudy, build: dict[str, Any], low: int,
                      high: int) -> list[int]:
        """The knob on :data:`st.UNSEEDED_REPEATS` - 1 more builds of a build that cannot be
        seeded (its spread widens the band); a repeat whose top misses counts as ``high``."""
        knobs = []
        m = self.measurer(ev)
        for _ in range(st.UNSEEDED_REPEATS - 1):
            built = ev.build(b.backend, self._entry(b).build(build))
            cache: dict[int, Probe] = {}

            def meets(v: int, bi: BuiltIndex = built, c: dict[int, Probe] = cache) -> bool:
                return self.probe(m, bi, b, build, v, c).meets(self.target)

            out = tgt.solve(low, high, meets)
            ev.release(built)
            knobs.append(high if out.value is None else int(out.value))
            self.repeat_evaluations += out.evaluations
        return knobs

    # --- the fit -----------------------------------------------------------------------------
    def fitted(self, b: sc.BuildStudy) -> dict[str, Any] | None:
        """The fit of one build's knob against N and its predictions (None: no sample met)."""
        ok = [r for r in b.samples if r["knob"] is not None]
        if not ok:
            return None
        fraction = len({r["high"] for r in ok}) > 1  # the range grows with N: fit a share of it
        ns = [r["n"] for r in ok]
        ys = [r["knob"] / r["high"] if fraction else r["knob"] for r in ok]
        f, errors = sc.choose_fit(ns, ys)
        full = self.ds.n_base
        at = [full, *[m * full for m in self.scale.predict_at]]
        highs = [self.bounds(b, round(n))[1:] for n in at]

        def scale_of(n: int, knob: float) -> float:
            high = next(r["high"] for r in ok if r["n"] == n)
            return knob / high if fraction else knob

        band = sc.bootstrap_band(b.curves, self.target, f.model, at, scale_of,
                                 resamples=self.scale.bootstrap, level=self.scale.band,
                                 seed=self.spec.seed)

        def knob_at(y: float, lo_hi: tuple[int, int]) -> int:
            low, high = lo_hi
            v = y * high if fraction else y
            return int(min(max(math.ceil(v - 1e-9), low), high))

        preds = [knob_at(f.predict(n), lh) for n, lh in zip(at, highs, strict=True)]
        surface_pred, surface = predict_surface(b.curves, self.target, full, scale_of,
                                                lambda y: knob_at(y, highs[0]))
        difficulty_pred, difficulty = self.difficulty(b, scale_of,
                                                      lambda y: knob_at(y, highs[0]))
        partition_pred, partition = self.partition(b)
        spread = max((st.repeat_spread(r["knob_repeats"]) for r in ok if r.get("knob_repeats")),
                     default=0.0)
        bands = [st.widen([knob_at(lo, lh), knob_at(hi, lh)], spread, *lh)
                 for (lo, hi), lh in zip(band, highs, strict=True)]
        ceil_rows = [r for r in b.samples if r.get("ceiling") is not None]
        trend = sc.ceiling_trend([r["n"] for r in ceil_rows], [r["ceiling"] for r in ceil_rows],
                                 self.target)
        return {
            "fit": {**f.to_dict(), "fitted": "fraction of the knob range" if fraction
                    else "knob", "holdout_error": errors,
                    "chosen_by": "hold-out error predicting the largest sample from the smaller"
                                 " ones" if all(e is not None for e in errors.values())
                                 else "default (fewer than three sample sizes met the target)",
                    "per_doubling": f.per_doubling(full), "band_level": self.scale.band,
                    "unseeded_spread": spread,
                    "valid_n": [min(ns), full]},
            "fraction": fraction,
            "predicted": preds[0],
            "predicted_surface": surface_pred,
            "surface_fit": None if surface is None else surface.to_dict(),
            "predicted_difficulty": difficulty_pred,
            "difficulty_fit": difficulty,
            "predicted_partition": partition_pred,
            "partition_fit": partition,
            "band": bands[0],
            "predicted_at": [{"multiple": m, "n": round(m * full), "knob": p, "band": bd,
                              "ceiling": trend.predict(m * full)}
                             for m, p, bd in zip(self.scale.predict_at, preds[1:], bands[1:],
                                                 strict=True)],
            "sample_knob": knob_at(ys[-1], highs[0]),
            "ceiling_trend": {**trend.to_dict(), "ceiling_at_full": trend.predict(full)},
        }

    def difficulty(self, b: sc.BuildStudy, scale_of: Callable[[int, float], float],
                   knob_at: Callable[[float], int]) -> tuple[int | None, dict[str, Any] | None]:
        """The per-query difficulty model's knob at the full N and its fit (as a dict)."""
        feats: list[np.ndarray] | None = []
        for c in b.curves:
            f = self.lid(c.n)
            if f is None or feats is None:
                feats = None
            else:
                feats.append(f[c.positions()])
        at_n = self.lid(self.ds.n_base) if feats else None
        pred, fit, knobs = predict_difficulty(b.curves, self.target, self.ds.n_base, self.k,
                                              scale_of, knob_at, feats, at_n)
        return pred, None if fit is None else {**fit.to_dict(), "variants": knobs}

    def partition(self, b: sc.BuildStudy) -> tuple[int | None, dict[str, Any] | None]:
        """The partition model's knob at the full N and its fit record
        (:mod:`retrieval.tune.scale_partition`); (None, None) for a backend it does not
        apply to (not an IVF), (None, record with the reason) for an IVF build it does not
        cover (codes other than exact vectors, another knob, too few training rows)."""
        checked = self._entry(b)
        cls = checked.cls
        if not (isinstance(cls, type) and issubclass(cls, SupportsCoarsePartition)):
            return None, None
        n = self.ds.n_base
        build, _, _ = self.bounds(b, n)
        index = cls(self.ds.dim, self.ds.metric, checked.build(build), seed=self.spec.seed,
                    threads=self.spec.threads)
        if isinstance(index, SupportsBuildThreads):
            index.set_build_threads(self.spec.index_build.threads or available_cpus())
        if isinstance(index, SupportsSharedTraining) and sp.TRAIN_ON == "build":
            index.share_training(self.quantizers)  # the full-N build reuses its k-means
        codes = cls.partition_codes()
        gap = index.partition_gap(b.knob)
        if gap is not None:
            return None, sp.not_covered(codes, gap)
        train, training = self.ds.base, sp.TRAINING["build"]
        if sp.TRAIN_ON == "largest sample":
            size = min(int(self.sizes[-1]), n)
            train = take_rows(self.ds.base, sc.nested_rows(n, [size], self.spec.seed)[0])
            training = sp.TRAINING["largest sample"] + (
                "" if self.scale.sampling == "uniform" else
                f" (as many seeded uniform rows: the {self.scale.sampling} samples do not "
                f"cover the base)")
        gt = self.ground_truth(self.ds)  # the full N's, which the check computes anyway
        t0 = time.perf_counter()
        conf, seed = self.spec.tune.confidence, self.spec.seed
        try:
            knob, fit = sp.predict_partition(
                index, train, training, self.ds.base,
                self.ds.queries[self.split.tune], gt.ids[self.split.tune, :self.k], self.k,
                self.target, lambda pq: lower_bound(pq, self.k, conf, seed), EPS)
        except ConfigError as exc:  # too few training rows for nlist at the full N
            return None, sp.not_covered(codes, str(exc))
        self.timing["partition_s"] += time.perf_counter() - t0
        return knob, fit.to_dict()

    # --- the full N --------------------------------------------------------------------------
    def run_full(self, fits: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        n_stop = {i: (f.get("ceiling_trend") or {}).get("n_stop") for i, f in fits.items()}
        self.answer = sc.answer_build(self.builds, self.sizes[-1], self.ds.n_base, n_stop)
        todo = [i for i, b in enumerate(self.builds) if b.stopped is None and i in fits]
        if self.scale.check == "answer":
            todo = [i for i in todo if i == self.answer]
        out: dict[int, dict[str, Any]] = {}
        if not todo:
            return out
        stages = len(self.sizes) + 1
        report("scale study", stages - 1, stages,
               f"full N={self.ds.n_base:,} ({len(todo)} builds)")
        t0 = time.perf_counter()
        with self.evaluator(self.ds) as ev:
            self.quantizers.give(ev.trained)  # the partition model's k-means, not repeated
            m = self.measurer(ev)
            for i in todo:
                out[i] = self.check_full(ev, m, self.builds[i], fits[i])
        self.timing["full_s"] += time.perf_counter() - t0
        report("scale study", stages, stages, f"full N={self.ds.n_base:,} checked")
        return out

    def check_full(self, ev: Evaluator, m: Measurer, b: sc.BuildStudy,
                   fitted: dict[str, Any]) -> dict[str, Any]:
        n = self.ds.n_base
        build, low, high = self.bounds(b, n)
        t0 = time.perf_counter()
        bp = self._entry(b).build(build)
        built = ev.build(b.backend, bp)
        build_s = time.perf_counter() - t0
        if measures_resident(self.spec.tune):  # the full-N build's bytes (and so its cost)
            attach_memory_report(built, self.ds.base, b.label, build)
        cache: dict[int, Probe] = {}
        top = self.probe(m, built, b, build, high, cache)
        res: dict[str, Any] = {"build_at_full": build, "range": [low, high],
                               "ceiling": top.recall_lb, "ceiling_recall": top.recall,
                               "build_s": build_s,
                               "shared_quantizer": built.info.extra.get("shared_quantizer")}
        if not top.meets(self.target):
            b.stopped = sc.ceiling_message(self.k, self.target, build, n, top.recall_lb,
                                           hint=sc.raise_hint(b.build, list(b.build)))
            ev.release(built)
            return {**res, "exact": None, "evaluations": 1}
        pred = int(fitted["predicted"])
        start = fitted.get(used_model(fitted))  # the model the study uses for this build
        if start is None:  # no model pinned anything: the fitted knob
            start = pred
        found = sc.local_search(
            low, high, int(start),
            lambda v: self.probe(m, built, b, build, v, cache).meets(self.target),
            known={high: True})
        exact = found.value
        config = self._entry(b).config

        def held(v: int) -> dict[str, Any]:
            h = m.heldout(built, config(build, {**b.fixed, b.knob: v}))
            p = self.probe(m, built, b, build, v, cache)
            return {"knob": v, "tuning_recall": p.recall, "tuning_lb": p.recall_lb,
                    "heldout": None if h is None else h.recall,
                    "heldout_lb": None if h is None else h.recall_lb,
                    "meets": p.meets(self.target) if h is None
                    else bool(h.recall_lb >= self.target - EPS)}

        res["predicted_recall"] = held(pred)
        res["sample_knob_recall"] = held(int(fitted["sample_knob"]))
        for key in ("predicted_difficulty", "predicted_partition"):
            if fitted.get(key) is not None:
                res[f"{key}_recall"] = held(int(fitted[key]))
        chosen: PointResult | None = None
        if exact is not None:
            chosen = m.full(built, config(build, {**b.fixed, b.knob: exact}))
            h = m.heldout(built, config(build, {**b.fixed, b.knob: exact}))
            res["chosen"] = chosen
            res["heldout"] = h
        ev.release(built)
        return {**res, "exact": exact, "evaluations": len(cache),
                "search_s": time.perf_counter() - t0 - build_s}


def _split(spec: SweepSpec, ds: VectorDataset) -> QuerySplit:
    from retrieval.tune.decide import split_queries

    return split_queries(ds.n_queries, spec.tune.heldout_fraction, spec.seed)


def check_scale_spec(spec: SweepSpec) -> None:
    """A scale study needs strategy target and a target recall."""
    if spec.target_recall is None:
        raise ConfigError(f"{spec.source}: a spec with 'scale' needs a target recall: set field "
                          f"'target_recall' (in (0, 1]) or pass --target-recall")
    if spec.tune.strategy != "target":
        raise ConfigError(f"{spec.source}: field 'tune.strategy' must be target for a spec "
                          f"with 'scale' (the knob is searched at each sample size); received "
                          f"{spec.tune.strategy}")
    if spec.filters is not None:
        raise ConfigError(f"{spec.source}: a spec with 'scale' cannot have 'filters' (a scale "
                          f"study of filtered search is not supported)")


def run_scale_study(spec: SweepSpec, run: RunDir, ds: VectorDataset, ref: Any,
                    progress: Progress | None, started: float) -> dict[str, Any]:
    """Run the study into ``run`` and return its summary (summary.json, a sweep summary with
    ``scale`` and one ``builds`` entry per build config)."""
    check_scale_spec(spec)
    study = Study(spec, ds, progress)
    run.write_yaml("spec.yaml", resolved(spec))
    run.write_manifest(kind=SweepSummary.KIND, seeds={"index": spec.seed, "query_split": spec.seed,
                                                  "samples": spec.seed},
                       dataset={**dataset_info(ds), "ref": ref}, spec_source=spec.source,
                       scale={"sizes": study.sizes, "full_n": ds.n_base})
    study.run_samples()
    fits = {i: f for i, b in enumerate(study.builds) if (f := study.fitted(b)) is not None}
    full = study.run_full(fits)
    run.record_threads(spec.threads)
    summary = scale_summary(study, fits, full, run.run_id, time.perf_counter() - started)
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    return typed.to_json_dict()


__all__ = ["RULE_NOTE", "Study", "check_scale_spec", "run_scale_study", "sample_dataset",
           "sample_ground_truth"]
