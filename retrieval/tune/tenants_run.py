"""``rwb sweep`` of a spec with ``tenants:``: layouts compared per tenant (workload ``tenants``).

For each index entry and build config of the spec, on the same data and tenants
(:mod:`retrieval.tune.tenants`):

- ``shared``: one index over every row with the tenant as a label attribute ``tenant`` (marked
  as the tenant: Qdrant's keyword index ``is_tenant``); each
  query searched with its tenant's filter: the backend's own filtered search where it has one
  (:class:`~retrieval.indexes.base.SupportsFilter`: pgvector's WHERE with the spec's
  ``iterative_scan`` / ``max_scan_tuples``, Qdrant's payload index, ...), else an unfiltered
  search ``overfetch * k`` deep whose foreign ids are dropped (post-filter);
- ``per_tenant``: one index per tenant over its rows (a tenant of <= k rows is searched exactly:
  an index would return all its rows anyway);
- ``flat_index``: exact (flat) search for tenants below the measured crossover, the per-tenant
  index above it (composed from the ``per_tenant`` and flat measurements of the same queries).

Every search config of the entry (grid order = cost order of the knob) is measured per layout;
a layout's knob is the first config whose share of tenants meeting the target (lower bounds,
:func:`~retrieval.tune.tenants.judge`) is >= ``tenants.meeting``. The answer is the cheapest such
layout by p95 (ms) and by measured bytes per vector. Latencies: one query per call, ms.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.filtering.attrs import Attributes, LabelColumn
from retrieval.filtering.exact import prepared, subset_knn
from retrieval.filtering.rows import RowFilter
from retrieval.filtering.spec import Where
from retrieval.indexes.base import IndexBackend, SupportsFilter
from retrieval.indexes.engine import filter_call_text
from retrieval.indexes.entry import CheckedEntry, SearchConfig, apply_search
from retrieval.indexes.filtered import postfilter_depth, raise_ef_for, strategy_call
from retrieval.runs import WORKLOAD_TENANTS, RunDir, typed_frame
from retrieval.stats.metrics import latency_summary
from retrieval.tune import tenants as tn
from retrieval.tune.decide import lower_bound
from retrieval.tune.retrieved import IDS_FILE, RetrievedIds
from retrieval.tune.runner import dataset_info
from retrieval.tune.spec import SweepSpec, checked_entries, resolved
from retrieval.tune.summary import SweepSummary
from retrieval.tune.units import entry_labels

log = logging.getLogger(__name__)

#: progress callback: (steps done, steps known, description)
Progress = Callable[[int, int, str], None]
#: the per-tenant table of the run directory (one row per layout point x tenant)
TENANTS_FILE = "tenants.parquet"
#: the tenant label of every base row, in the dataset's row order (.npy of strings)
LABELS_FILE = "tenant_labels.npy"


@dataclass
class Measured:
    """One layout x config over all queries: retrieved rows (nq, k), per-query ms, bytes."""

    rows: np.ndarray
    ms: np.ndarray
    index_bytes: int | None


class Study:
    def __init__(self, spec: SweepSpec, ds: VectorDataset, workdir: Path,
                 progress: Progress | None) -> None:
        assert spec.tenants is not None and spec.target_recall is not None
        self.spec, self.ds, self.cfg = spec, ds, spec.tenants
        self.k, self.target = spec.k, float(spec.target_recall)
        self.workdir, self.progress = workdir, progress
        self.ten = tn.tenancy(ds.n_base, ds.n_queries, spec.tenants, spec.seed, spec.source)
        self.sizes = self.ten.sizes()
        self.rows = self.ten.rows()
        self.qrows = self.ten.query_rows()
        self.base = prepared(ds.base, ds.metric)
        self.queries = prepared(ds.queries, ds.metric)
        t0 = time.perf_counter()
        self.truth = tn.tenant_truth(ds.base, ds.queries, ds.metric, self.ten, self.k)
        self.truth_s = time.perf_counter() - t0
        self.flat = self._flat()
        #: held-out queries (bool over queries): split within each tenant
        self.held = tn.tenant_split(self.ten, spec.tune.heldout_fraction, spec.seed)
        self.n_built = 0
        #: how the last shared layout filtered: engine | postfilter
        self.shared_filter = ""
        #: tenants the last per_tenant layout searched exactly: <= k rows (small), or whose
        #: index the backend refused for their size (refused)
        self.exact_tenants = {"small": 0, "refused": 0}

    def _bound(self, per_query: np.ndarray) -> float:
        return lower_bound(per_query, self.k, self.spec.tune.confidence, self.spec.seed)

    def _flat(self) -> Measured:
        """Exact search of each query among its tenant's rows, each timed alone."""
        nq = self.ds.n_queries
        out = np.full((nq, self.k), -1, dtype=np.int64)
        ms = np.zeros(nq)
        metric = self.ds.metric
        for rows, qrows in zip(self.rows, self.qrows, strict=True):
            for q in qrows:
                t0 = time.perf_counter_ns()
                out[q] = subset_knn(self.base, rows, self.queries[q:q + 1], metric, self.k)[1][0]
                ms[q] = (time.perf_counter_ns() - t0) / 1e6
        return Measured(out, ms, None)

    def _new(self, checked: CheckedEntry, build: Any, name: str) -> IndexBackend:
        wd = self.workdir / f"{self.n_built}-{name}"
        wd.mkdir(parents=True, exist_ok=True)
        self.n_built += 1
        return checked.cls(self.ds.dim, self.ds.metric, build, seed=self.spec.seed,
                           threads=self.spec.threads, workdir=wd)

    # --- layouts ----------------------------------------------------------------------------
    def shared(self, checked: CheckedEntry, build: Any,
               configs: list[SearchConfig]) -> list[Measured]:
        index = self._new(checked, build, "shared")
        try:
            engine = (self.cfg.shared_filter == "engine"
                      and isinstance(index, SupportsFilter))
            if engine and isinstance(index, SupportsFilter):
                names = np.asarray(self.ten.names, dtype=str)[self.ten.base]
                column = LabelColumn.from_rows(names.tolist())
                index.attach_attributes(Attributes(self.ds.n_base, {}, {"tenant": column},
                                                   tenant="tenant"))
            info = index.build(self.ds.base)
            strategy = "engine" if engine else "postfilter"
            depth = postfilter_depth(self.k, self.cfg.overfetch, self.ds.n_base)
            call = strategy_call(index, strategy, self.k, overfetch=self.cfg.overfetch,
                                 n=self.ds.n_base)
            current: dict[int, RowFilter] = {}

            def tenant_filter(t: int) -> RowFilter:
                """The filter of tenant ``t``, made when its queries start (one mask of n_base
                bools at a time, not one per tenant)."""
                if t not in current:
                    current.clear()
                    current[t] = RowFilter(Where(attr="tenant", eq=self.ten.names[t]),
                                           self.ten.base == t)
                return current[t]

            out = []
            for cfg in configs:
                apply_search(index, cfg)
                if not engine:
                    raise_ef_for(index, depth)  # an HNSW list below the depth cannot fill it
                out.append(self._time(lambda t, q: call(q, tenant_filter(t)).ids[0]))
                self._step(f"{checked.backend} shared {cfg.given}")
            self.shared_filter = strategy
            return [Measured(m.rows, m.ms, info.memory_bytes) for m in out]
        finally:
            index.close()

    def per_tenant(self, checked: CheckedEntry, build: Any,
                   configs: list[SearchConfig]) -> tuple[list[Measured], np.ndarray]:
        """Measured per config, and each tenant's index bytes (raw vector bytes for a tenant
        searched exactly; -1 when the backend does not measure its size). One tenant's index
        is open at a time (built, searched with every config, closed): 1,000 tenants never
        hold 1,000 connections or graphs at once."""
        nq, k = self.ds.n_queries, self.k
        rows_out = [np.full((nq, k), -1, dtype=np.int64) for _ in configs]
        ms_out = [np.zeros(nq) for _ in configs]
        nbytes = self.sizes * self.ds.dim * 4
        raw = self.ds.queries
        self.exact_tenants = {"small": 0, "refused": 0}
        for t, rows in enumerate(self.rows):
            qrows = self.qrows[t]
            if rows.size <= k:  # an index of <= k rows returns them all: searched exactly
                self._exact(t, rows_out, ms_out, "small")
                continue
            index = self._new(checked, build, f"t{t}")
            try:
                try:
                    mem = index.build(self.ds.base[rows]).memory_bytes
                except ConfigError as exc:  # params that do not fit the tenant (nlist > rows)
                    log.info("tenant %s: %s; searched exactly", self.ten.names[t], exc)
                    self._exact(t, rows_out, ms_out, "refused")
                    continue
                nbytes[t] = -1 if mem is None else mem
                for c, cfg in enumerate(configs):
                    if not qrows.size:
                        break
                    apply_search(index, cfg)
                    index.search(raw[qrows[:1]], k)  # warm-up, untimed
                    for q in qrows:
                        t0 = time.perf_counter_ns()
                        found = index.search(raw[q:q + 1], k).ids[0]
                        ms_out[c][q] = (time.perf_counter_ns() - t0) / 1e6
                        found = found[:k]
                        rows_out[c][q, :found.shape[0]] = np.where(
                            found >= 0, rows[np.maximum(found, 0)], -1)
            finally:
                index.close()
            if t % 50 == 0:
                self._step(f"{checked.backend} per_tenant: tenant {t + 1} of {self.ten.count}")
        total = None if (nbytes < 0).any() else int(nbytes.sum())
        return [Measured(r, m, total) for r, m in zip(rows_out, ms_out, strict=True)], nbytes

    def _exact(self, t: int, rows_out: list[np.ndarray], ms_out: list[np.ndarray],
               why: str) -> None:
        """Tenant ``t`` searched exactly in every config (the flat measurements)."""
        q = self.qrows[t]
        for r, m in zip(rows_out, ms_out, strict=True):
            r[q], m[q] = self.flat.rows[q], self.flat.ms[q]
        self.exact_tenants[why] += 1

    def _time(self, call: Callable[[int, np.ndarray], np.ndarray]) -> Measured:
        """Every query through ``call(tenant, query (1, dim))``, each timed alone (ms)."""
        nq = self.ds.n_queries
        out = np.full((nq, self.k), -1, dtype=np.int64)
        ms = np.zeros(nq)
        raw = self.ds.queries
        for t in np.flatnonzero([q.size for q in self.qrows])[:1]:  # warm-up, untimed
            call(int(t), raw[self.qrows[t][:1]])
        for t, qrows in enumerate(self.qrows):
            for q in qrows:
                t0 = time.perf_counter_ns()
                found = call(t, raw[q:q + 1])
                ms[q] = (time.perf_counter_ns() - t0) / 1e6
                out[q, :min(self.k, found.shape[0])] = found[:self.k]
        return Measured(out, ms, None)

    def _step(self, desc: str) -> None:
        if self.progress is not None:
            self.progress(0, 0, desc)

    # --- judging ------------------------------------------------------------------------------
    def point(self, layout: str, label: str, build: dict[str, Any], cfg: SearchConfig,
              m: Measured) -> dict[str, Any]:
        per_query = tn.tenant_recall(m.rows, self.truth, self.k)
        judged = tn.judge(per_query, self.ten, self.cfg.min_queries, self._bound, ~self.held)
        heldout = None
        if self.held.any():
            h = tn.judge(per_query, self.ten, self.cfg.min_queries, self._bound, self.held)
            hs = h.stats(self.target)
            heldout = {"tenants_judged": hs["tenants_judged"],
                       "tenants_meeting": hs["tenants_meeting"],
                       "queries": int(self.held.sum())}
        lat = latency_summary(m.ms)
        leaks = int(sum(np.isin(m.rows[q][m.rows[q] >= 0], self.rows[t], invert=True).sum()
                        for t, q in enumerate(self.qrows) if q.size))
        stats = judged.stats(self.target)
        meeting = stats["tenants_meeting"]
        return {
            "layout": layout, "label": label, "backend": cfg.backend, "build": build,
            "search": dict(cfg.given), **stats,
            "meets": bool(meeting is not None and meeting >= self.cfg.meeting - 1e-12),
            "p50_ms": lat["p50_ms"], "p95_ms": lat["p95_ms"], "p99_ms": lat["p99_ms"],
            "bytes_per_vector": None if m.index_bytes is None else m.index_bytes / self.ds.n_base,
            "foreign_ids": leaks, "heldout": heldout,
            "_judged": judged, "_measured": m,
        }

    def compose(self, per: Measured, nbytes: np.ndarray, cross: int | None) -> Measured:
        """flat below ``cross`` (None: every tenant), the per-tenant index from it."""
        flat_t = self.sizes < (cross if cross is not None else np.iinfo(np.int64).max)
        fq = flat_t[self.ten.queries]
        rows = np.where(fq[:, None], self.flat.rows, per.rows)
        ms = np.where(fq, self.flat.ms, per.ms)
        raw = self.sizes * self.ds.dim * 4
        if (nbytes[~flat_t] < 0).any():
            return Measured(rows, ms, None)
        return Measured(rows, ms, int(np.where(flat_t, raw, nbytes).sum()))


def run_entry(study: Study, checked: CheckedEntry, label: str) -> tuple[list[dict[str, Any]],
                                                                        list[dict[str, Any]]]:
    """Every layout x config of one entry's builds: (points, crossovers)."""
    layouts = study.cfg.layouts
    points: list[dict[str, Any]] = []
    crossovers: list[dict[str, Any]] = []
    for build in checked.builds():
        bd = build.model_dump(mode="json", exclude_none=True)
        configs = checked.configs(build)
        if "shared" in layouts:
            for cfg, m in zip(configs, study.shared(checked, build, configs), strict=True):
                points.append({**study.point("shared", label, bd, cfg, m),
                               "filter": study.shared_filter,
                               "filter_call": (filter_call_text(cfg.backend, cfg.given, study.k)
                                               if study.shared_filter == "engine" else None)})
        if "per_tenant" in layouts or "flat_index" in layouts:
            per, nbytes = study.per_tenant(checked, build, configs)
            for cfg, m in zip(configs, per, strict=True):
                p = {**study.point("per_tenant", label, bd, cfg, m),
                     "exact_tenants": dict(study.exact_tenants)}
                if "per_tenant" in layouts:
                    points.append(p)
                if "flat_index" not in layouts:
                    continue
                ok = np.nan_to_num(p["_judged"].lower, nan=0.0) >= study.target - 1e-12
                cross = tn.crossover(study.sizes, [m.ms[q] for q in study.qrows],
                                     [study.flat.ms[q] for q in study.qrows], ok)
                crossovers.append({"label": label, "build": bd, "search": dict(cfg.given),
                                   **cross})
                fi = study.point("flat_index", label, bd, cfg,
                                 study.compose(m, nbytes, cross["size"]))
                fi["crossover"] = cross["size"]
                points.append(fi)
    return points, crossovers


def choose(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (layout, label, build): the first config (grid order) that meets, else the last."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        groups.setdefault(repr((p["layout"], p["label"], p["build"])), []).append(p)
    return [next((p for p in ps if p["meets"]), ps[-1]) for ps in groups.values()]


def answer(chosen: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [p for p in chosen if p["meets"]]

    def pick(key: str) -> dict[str, Any] | None:
        have = [p for p in ok if p[key] is not None]
        if not have:
            return None
        best = min(have, key=lambda p: (p[key], p["p95_ms"]))
        return {k: best.get(k) for k in ("layout", "label", "build", "search", "p95_ms",
                                          "bytes_per_vector", "tenants_meeting", "crossover")}

    return {"by_p95": pick("p95_ms"), "by_bytes": pick("bytes_per_vector")}


def public(p: dict[str, Any], knob: bool = False) -> dict[str, Any]:
    out = {k: v for k, v in p.items() if not k.startswith("_")}
    if knob:
        out["knob"] = dict(p["search"])
    return out


def run_tenants_study(spec: SweepSpec, run: RunDir, ds: VectorDataset, ref: Any,
                      progress: Progress | None, started: float) -> dict[str, Any]:
    """Run the study into ``run``; returns its summary (``workload: tenants``)."""
    assert spec.tenants is not None
    run.write_yaml("spec.yaml", resolved(spec))
    run.write_manifest(kind=SweepSummary.KIND, seeds={"index": spec.seed, "tenants": spec.seed},
                       dataset={**dataset_info(ds), "ref": ref}, spec_source=spec.source)
    with tempfile.TemporaryDirectory(prefix="rwb-tenants-") as tmp:
        study = Study(spec, ds, Path(tmp), progress)
        points: list[dict[str, Any]] = []
        crossovers: list[dict[str, Any]] = []
        for checked, label in zip(checked_entries(spec), entry_labels(spec), strict=True):
            p, c = run_entry(study, checked, label)
            points += p
            crossovers += c
    chosen = choose(points)
    _write_tables(run, study, points, chosen)
    run.record_threads(spec.threads)
    sizes = study.sizes
    nq = np.array([q.size for q in study.qrows])
    cross = next((c for c in crossovers for p in chosen if p["layout"] == "flat_index"
                  and c["label"] == p["label"] and c["build"] == p["build"]
                  and c["search"] == p["search"]), crossovers[0] if crossovers else None)
    summary = {
        "kind": "sweep", "workload": WORKLOAD_TENANTS, "run_id": run.run_id, "name": spec.name,
        "dataset": ds.name, "dataset_fingerprint": ds.fingerprint, "metric": ds.metric,
        "k": spec.k, "strategy": "target", "target_recall": study.target,
        "confidence": spec.tune.confidence.model_dump(mode="json"),
        "latency_unit": "ms (one query per call)",
        "evaluations": len(points),
        "tenants": {
            "count": study.ten.count, "source": study.ten.source,
            "sizes": {"min": int(sizes.min()), "median": float(np.median(sizes)),
                      "max": int(sizes.max())},
            "queries_per_tenant": {"min": int(nq.min()), "max": int(nq.max()),
                                   "without": int((nq == 0).sum())},
            "min_queries": spec.tenants.min_queries, "meeting": spec.tenants.meeting,
            "judged_rule": tn.JUDGE_RULE, "groundtruth_s": study.truth_s,
        },
        "layouts": [public(p, knob=True) for p in chosen],
        "points": [public(p) for p in points],
        "crossover": cross,
        "answer": answer(chosen),
        "elapsed_s": time.perf_counter() - started,
    }
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    return typed.to_json_dict()


def _write_tables(run: RunDir, study: Study, points: list[dict[str, Any]],
                  chosen: list[dict[str, Any]]) -> None:
    """ids.parquet (every layout x config: ``layout``, ``tenant``, ``query``, ``ids``) and
    tenants.parquet (per tenant of each chosen point: size, queries, recall, bound)."""
    ids = RetrievedIds(study.ds)
    names = study.ten.names
    for p in points:
        rows = p["_measured"].rows
        for t, qrows in enumerate(study.qrows):
            for query_set, q in (("tune", qrows[~study.held[qrows]]),
                                 ("heldout", qrows[study.held[qrows]])):
                if q.size:
                    ids.add({"layout": p["layout"], "tenant": names[t], "label": p["label"],
                             "backend": p["backend"], "build": p["build"],
                             "search": p["search"]}, q, rows[q], query_set)
    ids.write(run)
    # the tenant of every base row (the dataset's row order), to recompute recall outside rwb
    np.save(run.file(LABELS_FILE), np.asarray(names, dtype=str)[study.ten.base])
    table = []
    for p in chosen:
        j = p["_judged"]
        for t in range(study.ten.count):
            table.append({"layout": p["layout"], "label": p["label"], "tenant": names[t],
                          "size": int(study.sizes[t]), "queries": int(study.qrows[t].size),
                          "recall": None if np.isnan(j.mean[t]) else float(j.mean[t]),
                          "lower": None if np.isnan(j.lower[t]) else float(j.lower[t]),
                          "pooled": bool(j.pooled[t])})
    if table:
        run.write_frame(TENANTS_FILE, typed_frame(table))


__all__ = ["IDS_FILE", "LABELS_FILE", "TENANTS_FILE", "run_tenants_study"]
