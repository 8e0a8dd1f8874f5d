"""``cold: true``: first queries after the index files' pages were dropped (issue 31, item 3).

An index that serves from its files (Faiss read with ``IO_FLAG_MMAP``, LanceDB's table folder:
a backend with :class:`SupportsColdOpen`) is built once, saved, and opened afresh for each
search config; its files' pages are then dropped from the page cache (:func:`drop_pages`: the
method used is named in the output) and the queries are searched one at a time, in the dataset's
order, then again ``WARM_PASSES`` times.

Definitions (latencies in ms, single-query):

- ``cold_p99_ms``: p99 of the first ``COLD_WINDOW`` (32) queries after the drop;
- ``warm_p99_ms``: p99 of the last pass (the pages resident by then);
- ``queries_to_warm``: the number of queries searched before the first window of
  ``COLD_WINDOW`` consecutive queries whose p99 is within ``WARM_FACTOR`` (1.2x) of
  ``warm_p99_ms`` (0: warm from the first query; None: never within the run);
- ``p99_curve``: that rolling p99 over the whole run (cold pass, then the warm passes), as
  ``[queries searched before the window, p99 ms]`` pairs (at most 200).

RAM budgets (25 / 50 / 100% of the index's bytes): where this machine lets rwb make a memory
cgroup (:mod:`retrieval.tune.cgroup`: cgroup v2 ``memory.max`` or v1 ``memory.limit_in_bytes``),
each budget is served by a child process (:mod:`retrieval.tune.cold_child`) in a group of rwb's
whose limit is that child's own resident memory once loaded (everything except the index pages)
+ the budget's share of the index pages a warm run keeps cached (``warm_resident_bytes``); the
method is ``cgroup-v1`` / ``cgroup-v2``.
Elsewhere the approximation ``fadvise-window`` is used: before every window of queries, the
pages of each file beyond the budget's share of its bytes are dropped again, so at most that
share (plus what one window touches) stays cached. ``cold_info.budget_method`` names the method
and, for a fallback, why.
"""

from __future__ import annotations

import logging
import mmap
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.groundtruth.exact import ground_truth
from retrieval.indexes.registry import create_index, get_backend
from retrieval.phases import report
from retrieval.runs import WORKLOAD_COLD, RunDir
from retrieval.stats.metrics import recall_by_id
from retrieval.tune import target as tgt
from retrieval.tune.cgroup import memory_cgroup
from retrieval.tune.coldpass import (
    BUDGETS,
    COLD_WINDOW,
    SHARED_BUFFERS,
    WARM_FACTOR,
    WARM_PASSES,
    cold_profile,
    drop_pages,
    file_bytes,
    queries_to_warm,
    resident_fraction,
    timed_pass,
)
from retrieval.tune.decide import lower_bound
from retrieval.tune.measure import EPS
from retrieval.tune.runner import dataset_info
from retrieval.tune.spec import SweepSpec, checked_entries, resolved
from retrieval.tune.summary import SweepSummary
from retrieval.tune.units import entry_labels, knob_bounds, monotone_knob, target_fixed_grid

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]

DEFINITIONS = (f"cold_p99_ms: p99 of the first {COLD_WINDOW} queries after the drop; "
               f"warm_p99_ms: p99 of the last of {WARM_PASSES} further passes; queries_to_warm: "
               f"queries searched before the first window of {COLD_WINDOW} consecutive queries "
               f"whose p99 is within {WARM_FACTOR}x of warm_p99_ms")
FADVISE_WINDOW = ("fadvise-window: before each window of queries the pages of each index file "
                  "beyond the budget's share of its bytes are dropped again "
                  "(posix_fadvise DONTNEED); no cgroup memory limit")
CGROUP_METHOD = ("{method}: each budget served by a child process in a memory cgroup of rwb's "
                 "whose limit is the child's resident bytes once loaded (everything but the "
                 "index pages) + the budget's share of the index pages a warm run keeps cached "
                 "(warm_resident_bytes) + {headroom} MiB; "
                 "index pages beyond it are reclaimed and read again")


def budget_method(info: dict[str, Any]) -> str:
    """The budgets' method for this machine's cgroup ``info`` (:func:`memory_cgroup`)."""
    from retrieval.tune.cgroup import HEADROOM_BYTES

    if info.get("usable"):
        return CGROUP_METHOD.format(method=f"cgroup-v{info['version']}",
                                    headroom=HEADROOM_BYTES >> 20)
    return f"{FADVISE_WINDOW} ({info.get('why')})"


@runtime_checkable
class SupportsColdOpen(Protocol):
    """A backend whose built index can be saved and opened again serving from its files (so
    their pages can be dropped)."""

    def save_cold(self, folder: Path) -> None: ...

    def open_cold(self, folder: Path, n: int) -> list[Path]: ...


@runtime_checkable
class SupportsServerCold(Protocol):
    """A backend whose index lives in a server (pgvector): ``cold_server(work)`` is a context
    manager for the server to build on, with ``index(...)``, ``drop(table, drop_pages,
    shared_buffers_bytes)`` and ``budget_reason()`` (:mod:`retrieval.tune.cold_server`)."""

    @classmethod
    def cold_server(cls, work: Path) -> Any: ...

    @classmethod
    def cold_starts_server(cls) -> bool: ...


def starts_own_server(backend: str) -> bool:
    """Whether a cold run of ``backend`` starts its own server (pgvector with $RWB_PG_URL
    unset): the preflight check of a user's server does not apply then."""
    cls = get_backend(backend)
    return issubclass(cls, SupportsServerCold) and bool(cls.cold_starts_server())


# --- the run ---------------------------------------------------------------------------------
def check_cold_spec(spec: SweepSpec) -> None:
    for i, e in enumerate(spec.indexes):
        if not issubclass(get_backend(e.backend), (SupportsColdOpen, SupportsServerCold)):
            raise ConfigError(f"{spec.source}: field 'indexes[{i}].backend': a spec with "
                              f"'cold: true' needs a backend that serves from its files "
                              f"(faiss-hnsw, faiss-ivf, lancedb-*, qdrant) or from a server "
                              f"whose caches rwb can drop (pgvector, pgvector-ivfflat); "
                              f"received {e.backend}")
    if spec.filters is not None or spec.scale is not None:
        raise ConfigError(f"{spec.source}: a spec with 'cold: true' cannot have 'filters' or "
                          f"'scale' (one workload dimension at a time)")


class ColdRun:
    def __init__(self, spec: SweepSpec, ds: VectorDataset, work: Path,
                 progress: Progress | None) -> None:
        self.spec, self.ds, self.work, self.progress = spec, ds, work, progress
        self.gt = ground_truth(ds, spec.k).ids[:, : spec.k]
        self.queries = np.ascontiguousarray(ds.queries)
        self.evaluations = 0
        self.children = 0
        self.cgroup = memory_cgroup()

    def knob_configs(self, i: int, label: str, built: Any, bp: Any) -> list[dict[str, Any]]:
        """With a target: the cheapest knob (warm, lower bound over all queries) with the
        entry's other search params; else every search config of the entry."""
        checked = checked_entries(self.spec)[i]
        spec = self.spec
        knob = monotone_knob(checked.cls, bp, spec.k, spec.tune, label)
        if spec.target_recall is None or knob is None:
            return [dict(s) for s in checked.search_grid]
        fixed = target_fixed_grid(spec, i, knob)[0]
        low, high = knob_bounds(checked.cls, knob, bp, spec.k, spec.tune)
        target = float(spec.target_recall)

        def meets(v: int) -> bool:
            built.set_search_params(**{**fixed, knob: v})
            res = built.search(self.queries, spec.k)
            pq = recall_by_id(res.ids, self.gt, spec.k)
            self.evaluations += 1
            return lower_bound(pq, spec.k, spec.tune.confidence, spec.seed) >= target - EPS

        found = tgt.solve(low, high, meets)
        return [{**fixed, knob: found.value if found.value is not None else high}]

    def measure(self, backend: str, bp: Any, snap: Path, search: dict[str, Any],
                budget: float | None) -> dict[str, Any]:
        ds, spec = self.ds, self.spec
        idx = create_index(backend, ds.dim, ds.metric, bp, seed=spec.seed, threads=spec.threads)
        try:
            assert isinstance(idx, SupportsColdOpen)
            files = idx.open_cold(snap, ds.n_base)
            idx.set_search_params(**search)
            method = drop_pages(files)
            resident = resident_fraction(files)
            before = None
            if budget is not None and budget < 1.0:
                def before(j: int) -> None:
                    if j % COLD_WINDOW == 0:
                        drop_pages(files, keep_fraction=budget)
            cold, _ = timed_pass(idx, self.queries, spec.k, before)
            warm = ids = None
            for _ in range(WARM_PASSES):
                warm, ids = timed_pass(idx, self.queries, spec.k, before)
            assert warm is not None and ids is not None
            pq = recall_by_id(ids, self.gt, spec.k)
            warm_frac = resident_fraction(files) if budget is None else None
            pages = sum(-(-f.stat().st_size // mmap.PAGESIZE) for f in files) * mmap.PAGESIZE
            return {**cold_profile(cold, warm), "drop_method": method,
                    "resident_after_drop": resident,
                    "index_file_bytes": file_bytes(files),
                    "warm_resident_bytes": (None if warm_frac is None
                                            else int(warm_frac * pages)),
                    "recall": float(pq.mean()),
                    "recall_lower": lower_bound(pq, spec.k, spec.tune.confidence, spec.seed),
                    "p95_ms": float(np.percentile(warm, 95))}
        finally:
            idx.close()

    def measure_budget(self, backend: str, bp: Any, snap: Path, search: dict[str, Any],
                       budget: float, row: dict[str, Any]) -> dict[str, Any]:
        """One RAM budget: in a child process under a cgroup limit where the machine allows
        it (a share of the index pages the warm run kept cached, ``warm_resident_bytes``:
        preallocated file space no query touches is not the index's), else by the
        fadvise-window approximation (a share of each file's bytes); ``method`` names which,
        ``budget_of`` what the share is of."""
        keys = ("cold_p99_ms", "warm_p99_ms", "queries_to_warm", "recall_lower")
        index_bytes, of = int(row["index_file_bytes"]), "index_file_bytes"
        if self.cgroup.get("usable") and row.get("warm_resident_bytes"):
            index_bytes, of = int(row["warm_resident_bytes"]), "warm_resident_bytes"
        head = {"budget": budget, "budget_bytes": int(budget * index_bytes), "budget_of": of}
        if self.cgroup.get("usable"):
            from retrieval.tune.cgroup import serve_in_group

            spec, ds = self.spec, self.ds
            job = {"backend": backend, "dim": ds.dim, "metric": ds.metric, "build": bp,
                   "seed": spec.seed, "threads": spec.threads, "snapshot": str(snap),
                   "n": ds.n_base, "search": search, "k": spec.k}
            self.children += 1
            try:
                got = serve_in_group(self.cgroup, job, self.queries, budget, index_bytes,
                                     self.work / f"child-{self.children}")
            except OSError as exc:  # the kernel refused the group or its limit
                log.warning("cold run: cgroup not usable (%s); budgets use fadvise-window", exc)
                self.cgroup = {**self.cgroup, "usable": False,
                               "why": f"creating or limiting rwb's group failed: {exc}"}
            else:
                cold, warm, ids = (got.pop(key, None) for key in ("cold", "warm", "ids"))
                if cold is None or warm is None or ids is None:
                    return {**head, **dict.fromkeys(keys), **got}
                pq = recall_by_id(ids, self.gt, spec.k)
                prof = cold_profile(cold, warm)
                return {**head, **{key: prof[key] for key in keys[:3]},
                        "recall_lower": lower_bound(pq, spec.k, spec.tune.confidence,
                                                    spec.seed), **got}
        m = self.measure(backend, bp, snap, search, budget)
        head.update(budget_bytes=int(budget * row["index_file_bytes"]),
                    budget_of="index_file_bytes")
        return {**head, **{key: m[key] for key in keys}, "method": "fadvise-window",
                "served": True}

    def measure_config(self, label: str, backend: str, build: dict[str, Any], bp: Any,
                       snap: Path, search: dict[str, Any]) -> dict[str, Any]:
        """One search config: cold and warm, then (with a target) per RAM budget."""
        row: dict[str, Any] = {"label": label, "backend": backend, "build": build,
                               "search": search}
        row.update(self.measure(backend, bp, snap, search, None))
        if self.spec.target_recall is not None:
            row["budgets"] = [self.measure_budget(backend, bp, snap, search, f, row)
                              for f in BUDGETS]
        if self.progress:
            self.progress(self.evaluations, 0, f"{label} {search}: cold p99 "
                                               f"{row['cold_p99_ms']:.2f} ms, warm p99 "
                                               f"{row['warm_p99_ms']:.2f} ms")
        return row

    def run_entry(self, i: int, label: str) -> list[dict[str, Any]]:
        checked = checked_entries(self.spec)[i]
        if issubclass(get_backend(checked.backend), SupportsServerCold):
            from retrieval.tune.cold_server import run_server_entry

            return run_server_entry(self, i, label)
        ds, spec = self.ds, self.spec
        rows = []
        for b, build in enumerate(checked.build_grid):
            bp = checked.build(build)
            idx = create_index(checked.backend, ds.dim, ds.metric, bp, seed=spec.seed,
                               threads=spec.threads)
            try:
                idx.build(ds.base)
                configs = self.knob_configs(i, label, idx, bp)
                snap = self.work / f"{label}-{b}"
                snap.mkdir(parents=True, exist_ok=False)
                assert isinstance(idx, SupportsColdOpen)
                idx.save_cold(snap)
            finally:
                idx.close()
            try:
                for search in configs:
                    rows.append(self.measure_config(label, checked.backend, build, bp, snap,
                                                    search))
            finally:
                shutil.rmtree(snap, ignore_errors=True)  # rwb's own copy, never kept
        return rows


def _budget_method(info: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The run's budget method: this machine's (:func:`budget_method`), or ``shared_buffers``
    where every budget was a server's (pgvector), or both named when mixed."""
    used = {str(b.get("method")) for r in rows for b in r.get("budgets") or []}
    if used == {"shared_buffers"}:
        return SHARED_BUFFERS
    if "shared_buffers" in used:
        return f"{budget_method(info)}; pgvector entries: {SHARED_BUFFERS}"
    return budget_method(info)


def run_cold(spec: SweepSpec, run: RunDir, ds: VectorDataset, ref: Any,
             progress: Progress | None, started: float) -> dict[str, Any]:
    """Run the cold measurement into ``run``; its summary (``workload: cold``, a ``cold`` list
    with ``cold_p99_ms``, ``warm_p99_ms``, ``queries_to_warm`` per index and search config)."""
    check_cold_spec(spec)
    run.write_yaml("spec.yaml", resolved(spec))
    run.write_manifest(kind=SweepSummary.KIND, seeds={"index": spec.seed},
                       dataset={**dataset_info(ds), "ref": ref}, spec_source=spec.source)
    cr = ColdRun(spec, ds, run.path / "cold-index", progress)
    labels = entry_labels(spec)
    rows: list[dict[str, Any]] = []
    try:
        for i, label in enumerate(labels):
            report("cold run", i, len(labels), label)
            rows.extend(cr.run_entry(i, label))
    finally:
        shutil.rmtree(cr.work, ignore_errors=True)  # the saved indexes: rwb's, in its run
    report("cold run", len(labels), len(labels), "done")
    run.record_threads(spec.threads)
    bmethod = _budget_method(cr.cgroup, rows)
    summary = {
        "kind": SweepSummary.KIND, "workload": WORKLOAD_COLD, "run_id": run.run_id,
        "name": spec.name, "dataset": ds.name, "dataset_fingerprint": ds.fingerprint,
        "metric": ds.metric, "k": spec.k, "target_recall": spec.target_recall,
        "strategy": "target" if spec.target_recall is not None else "grid",
        "latency_unit": "ms", "evaluations": cr.evaluations + len(rows),
        "backends": {}, "builds": [], "rows": [], "pareto": [],
        "cold": rows,
        "cold_info": {"definitions": DEFINITIONS, "budget_method": bmethod,
                      "drop_methods": sorted({str(r["drop_method"]) for r in rows}),
                      "method": bmethod.split(":")[0],
                      "cgroup": {**cr.cgroup, "used": any(
                          str(b.get("method", "")).startswith("cgroup")
                          for r in rows for b in r.get("budgets") or [])}, "budgets": list(BUDGETS),
                      "wall_s": time.perf_counter() - started},
    }
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    return typed.to_json_dict()


__all__ = ["BUDGETS", "COLD_WINDOW", "WARM_FACTOR", "SupportsColdOpen", "SupportsServerCold",
           "check_cold_spec",
           "cold_profile", "drop_pages", "file_bytes", "queries_to_warm", "resident_fraction",
           "run_cold"]
