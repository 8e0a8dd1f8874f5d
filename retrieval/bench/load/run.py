"""`rwb bench load SPEC`: latency under load for one or more configs. For each config: a closed
loop at each client count, an open loop at each explicit rate, and the capacity search (the
highest offered rate whose corrected p99 stays within the SLO with recall at the target); then
the run directory (spec.yaml, manifest.json, points.parquet, summary.json), and with a
``writes`` section, searching while writing on a fresh index of each config
(:mod:`.writing`; its timeline in writes_timeline.parquet).

A point that ends early (a server that died: ``abort_errors`` consecutive errors) is kept and
marked ``partial``; the run then stops measuring, writes what it has with ``partial: true`` and
the reason, and the CLI exits 1. Roles: :mod:`.spec` -> :mod:`.stats`, :mod:`.capacity` (pure)
-> :mod:`.drivers`, :mod:`.procs`, :mod:`.targets` (live) -> :mod:`.points` (THE point
runner) -> here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.bench.load.capacity import search_capacity
from retrieval.bench.load.drivers import Target
from retrieval.bench.load.points import LoadPointRunner, loop_options
from retrieval.bench.load.spec import LoadSpec, max_lag_us

log = logging.getLogger(__name__)
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class LoadBenchResult:
    summary: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def partial(self) -> bool:
        return bool(self.summary.get("partial"))


def measure_config(spec: LoadSpec, m: LoadPointRunner, note: Callable[[str], None]
                   ) -> dict[str, Any]:
    """Every point of one config; the capacity at the SLO (None when not searched)."""
    for c in spec.closed.clients if spec.closed else []:
        if m.aborted:
            break
        m.closed(c)
        note(f"{m.label}: closed, {c} clients")
    o = spec.open
    for r in o.rates if o else []:
        if m.aborted:
            break
        m.open(r)
        note(f"{m.label}: open, {r:g} QPS")
    cap: dict[str, Any] = {"capacity_qps": None, "first_fail_qps": None,
                           "limited_by": "not searched"}
    if o is not None and o.search is not None and not m.aborted:
        s = o.search

        def measure(rate: float) -> dict[str, Any]:
            row = m.open(rate)
            note(f"{m.label}: capacity search, {rate:.0f} QPS")
            return row

        res = search_capacity(measure, lambda row: bool(row["meets_slo"]),
                              start_qps=s.start_qps, max_qps=s.max_qps, growth=s.growth,
                              steps=s.steps, rel_tol=s.rel_tol)
        _mark_search_rows(m.rows, res.rows)
        cap = {"capacity_qps": res.capacity_qps, "first_fail_qps": res.first_fail_qps,
               "limited_by": res.limited_by}
    return cap


def _mark_search_rows(rows: list[dict[str, Any]], searched: list[dict[str, Any]]) -> None:
    """Copy the search's step numbers onto the kept rows (the search saw copies)."""
    open_rows = [r for r in rows if r["mode"] == "open"]
    tail = open_rows[len(open_rows) - len(searched):] if searched else []
    for mine, theirs in zip(tail, searched):
        mine["search_step"] = theirs["search_step"]


def scaling(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Does the config run in parallel inside the client process (a library releasing the
    GIL)? From the closed loops: QPS at the most clients over QPS at one, and the client
    process's busy cores (> 1.3 is impossible for GIL-bound Python code)."""
    closed = sorted((r for r in rows if r["mode"] == "closed" and not r["partial"]),
                    key=lambda r: r["clients"])
    if len(closed) < 2 or not closed[0]["achieved_qps"]:
        return {"verdict": "not measured (needs closed loops at two client counts)"}
    lo, hi = closed[0], closed[-1]
    ratio = hi["achieved_qps"] / lo["achieved_qps"]
    cores = max(r["client_cpu_cores"] or 0.0 for r in closed)
    if cores >= 1.3:
        verdict = f"parallel in this process ({cores:.2f} cores busy): the library releases the GIL"
    elif cores < 0.5:
        verdict = "the work is outside this process (a server): client CPU is not the limit"
    else:
        verdict = (f"{ratio:.2f}x QPS from {lo['clients']} to {hi['clients']} clients with "
                   f"{cores:.2f} cores busy: GIL-bound, or the cores are busy elsewhere")
    return {"clients": [lo["clients"], hi["clients"]], "qps_ratio": ratio,
            "client_cpu_cores_max": cores, "verdict": verdict}


def _health(rows: list[dict[str, Any]]) -> list[str]:
    notes = []
    for r in rows:
        where = (f"{r['config']} {r['mode']} "
                 + (f"{r['offered_qps']:g} QPS" if r["offered_qps"] else f"{r['clients']} "
                    f"clients"))
        if not r["generator_ok"]:
            notes.append(f"{where}: the load generator could not keep the schedule (lag p99 "
                         f"{r['lag_p99_us']:.0f} us): this point measures the client, not the "
                         f"server")
        if r["client_cpu_saturated"]:
            notes.append(f"{where}: client CPU saturated ({r['client_cpu_cores']:.2f} cores)")
        if r["mode"] == "open" and r["sent_late_fraction"] > 0.5 and r["meets_slo"]:
            notes.append(f"{where}: {r['sent_late_fraction']:.0%} of queries waited for a free "
                         f"client: raise open.clients")
    return notes


@contextlib.contextmanager
def _datasets() -> Iterator[Callable[[Any, int], tuple[Any, Any]]]:
    from retrieval.groundtruth.exact import ground_truth
    from retrieval.loaders.catalog import resolve_dataset

    seen: dict[str, tuple[Any, Any]] = {}

    def get(spec_ds: Any, k: int) -> tuple[Any, Any]:
        key = repr(spec_ds)
        if key not in seen:
            ds = resolve_dataset(spec_ds, where="load spec: field 'dataset'")
            seen[key] = (ds, ground_truth(ds, k).top(k).ids)
        return seen[key]

    yield get


def _writes_phase(spec: LoadSpec, r: Any, ds: Any, base: Path, note: Callable[[str], None]
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Searching while writing on a fresh index of config ``r`` (see :mod:`.writing`)."""
    from retrieval.bench.load.targets import opened_index
    from retrieval.bench.load.writing import measure_writes

    workdir = base / f"writes-{abs(hash(r.label))}"
    workdir.mkdir(parents=True, exist_ok=True)
    with opened_index(r, ds, spec, workdir) as opened:
        summary, wrows, _ = measure_writes(spec, opened, r.search, ds, r.label, note,
                                           os.cpu_count() or 1)
    return summary, wrows


#: an extra target (the semantic cache): given the spec's dataset, a context manager yielding
#: (an object with Target's fields, its facts)
ExtraTarget = Callable[[Any], contextlib.AbstractContextManager[tuple[Any, dict[str, Any]]]]


def run_load_bench(spec: LoadSpec, *, progress: Progress | None = None,
                   workdir: Path | str | None = None, extra: tuple[ExtraTarget, ...] = (),
                   tracing: Any = None) -> LoadBenchResult:
    """Build each config, load it, search its capacity; then each ``extra`` target (e.g.
    :func:`retrieval.cache.loadtarget.lookup_target`, which the CLI hands in); see the module
    docstring. ``tracing`` (a :class:`retrieval.otel.Tracing`, None: off): one span per
    measured point, its trace id in the point's row (``trace_id``)."""
    from retrieval.bench.load.targets import index_target, resolve_configs

    configs = resolve_configs(spec)
    n_cfg = len(configs) + len(extra)
    w = spec.writes
    static = spec.closed is not None or (spec.open is not None and bool(
        spec.open.rates or spec.open.search))
    per = (len(spec.closed.clients) if spec.closed else 0) + (
        (len(spec.open.rates) + (spec.open.search.steps if spec.open.search else 0))
        if spec.open else 0) + (
        (len(w.rates) + (w.search.steps if w.search else 0)) if w else 0)
    total, done = max(1, n_cfg * per), [0]

    def note(what: str) -> None:
        done[0] += 1
        if progress:
            progress(min(done[0], total), total, what)

    out: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    aborted: str | None = None
    with contextlib.ExitStack() as stack, _datasets() as datasets:
        base = Path(workdir) if workdir is not None else Path(  # a str is taken too
            stack.enter_context(tempfile.TemporaryDirectory(prefix="rwb-ld-")))
        for r in configs:
            if aborted:
                break
            ds, gt = datasets(r.dataset, spec.k)
            entry: dict[str, Any] = {"label": r.label, "backend": r.backend}
            if static:  # an open section without rates or search only sets the writes' loop
                with index_target(r, ds, gt, spec, base) as (target, facts):
                    from retrieval.bench.load.procs import factory_for

                    m = LoadPointRunner(spec, target, r.label, factory_for(spec, r, ds, gt, base)
                                 if spec.client == "processes" else None, tracing, r.backend)
                    cap = measure_config(spec, m, note)
                entry.update({**facts, **cap, "scaling": scaling(m.rows)})
                rows += m.rows
                aborted = aborted or m.aborted
            if w is not None and not aborted:
                writes, wrows = _writes_phase(spec, r, ds, base, note)
                entry["writes"] = writes
                rows += wrows
                aborted = aborted or writes["aborted"]
            out.append({**entry, "dataset": ds.name, "metric": ds.metric})
        for make in extra:
            if aborted:
                break
            ds, _ = datasets(spec.dataset, spec.k)
            with make(ds) as (t, facts):
                target = Target(t.name, t.nq, t.call, t.score, getattr(t, "acall", None))
                m = LoadPointRunner(spec, target, str(facts["label"]), tracing=tracing,
                             backend=str(facts.get("backend") or "") or None)
                cap = measure_config(spec, m, note)
            out.append({**facts, **cap, "scaling": scaling(m.rows), "dataset": ds.name})
            rows += m.rows
            aborted = aborted or m.aborted
    for c in out:
        c["points"] = [r for r in rows if r["config"] == c["label"]]
    summary = {
        "kind": "bench-load", "name": spec.name, "k": spec.k, "client": spec.client,
        "slo": spec.slo.model_dump(mode="json"), "max_lag_us": max_lag_us(spec),
        "warmup_s": spec.warmup_s, "duration_s": spec.duration_s,
        "latency_unit": "ms; corrected = from the intended send time, uncorrected = from the "
                        "actual send (closed loop: HdrHistogram record_corrected_value with the "
                        "run's median latency as the expected interval)",
        "configs": out, "health": _health(rows),
        "partial": aborted is not None, "aborted": aborted,
    }
    return LoadBenchResult(summary, rows)


def write_load_run(spec: LoadSpec, result: LoadBenchResult, out: str | Path | None, *,
                   force: bool = False) -> Any:
    """Run directory: spec.yaml, manifest.json (status ``partial`` when a point was aborted),
    points.parquet (one row per point), summary.json."""
    from retrieval.bench.summary import LoadBenchSummary
    from retrieval.runs import RunDir

    run = RunDir.create(out, f"{LoadBenchSummary.KIND}-{spec.name}", force=force)
    with run.recording():
        run.write_yaml("spec.yaml", spec.model_dump(mode="json"))
        run.write_manifest(kind=LoadBenchSummary.KIND, spec_source=spec.source,
                           seeds={"schedule": spec.seed, "index": spec.seed},
                           index_threads=spec.threads, client=spec.client)
        run.write_table("points.parquet", result.rows)
        timeline = [t for c in result.summary.get("configs", [])
                    for t in (c.get("writes") or {}).get("timeline", [])]
        if timeline:
            run.write_table("writes_timeline.parquet", timeline)
        result.summary["run_id"] = run.run_id
        run.write_summary(LoadBenchSummary.model_validate(result.summary))
        run.record_threads(spec.threads)
    if result.partial:
        run.set_status("partial", str(result.summary.get("aborted"))[:500])
    return run


__all__ = ["LoadBenchResult", "LoadPointRunner", "loop_options", "run_load_bench",
           "write_load_run"]
