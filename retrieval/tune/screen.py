"""``tune.build_screen``: early stopping of build candidates on a nested sample.

Before the sweep, every build candidate (each target unit of the plan) is built on ONE seeded
sample of the base (``fraction`` of it, at least ``MIN_ROWS`` rows; the same tuning queries,
their exact ground truth on the sample) and searched there:

1. **ceiling**: one probe at the top of its search range; when that recall lower bound is
   below the target the candidate is dropped (a build's ceiling falls as N grows, so it would
   not meet at the full N either; the scale study measures the same trend);
2. **cost**: the target search on the sample gives its cheapest knob meeting the target, and
   its batch ms per query there (the fastest of 5 passes after 2 untimed ones, whatever the
   sweep's objective: a screening compares candidates); a candidate whose cost exceeds the
   best candidate's by more than ``cost_margin`` (``cost > best * (1 + cost_margin)``) is
   dropped.

With ``tune.concurrent_builds`` the sample builds run that many at once (build threads split
between them, as in the sweep), a wave at a time: built, searched, released.

The rule is this fixed one, not an Optuna pruner: a pruner compares intermediate values of
trials along one budget axis, while here each candidate is measured once at one sample size
and compared with the others there (documented rather than forced into a pruner). Units of a
grid strategy, of a joint (two-knob) search and of filtered workloads are not screened. The
dropped candidates are the summary's ``pruned`` list (``reason``: ``ceiling`` or ``cost``,
``at_n``: the sample's size, and what was measured there); their builds on the sample count
in ``screen_build_s`` and in ``build_cost_s``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.tune import target as tgt
from retrieval.tune.derived import SCREEN_ATTR
from retrieval.tune.units import Unit

log = logging.getLogger(__name__)

#: fewest base rows a screening sample holds (or the whole base when smaller)
MIN_ROWS = 1000
#: batch passes timed (the fastest is kept) and untimed passes before them, per candidate
COST_REPEATS, COST_WARMUP = 5, 2


def screenable(u: Unit) -> bool:
    return u.method == "target" and u.knob is not None and u.knob2 is None and u.strategy is None


def screen(spec: Any, plan: Sequence[Unit], ds: VectorDataset, split: Any) -> dict[str, Any]:
    """Screen the plan's candidates (see the module doc); returns the record kept in the study:
    ``pruned`` (unit dicts with ``reason``, ``at_n``, ``ceiling``, ``knob``, ``cost_ms``,
    ``best_cost_ms``), ``at_n``, ``fraction``, ``screen_build_s`` (seconds building on the
    sample), ``screen_s`` (seconds of the whole screening)."""
    from retrieval.evaluation import Evaluator
    from retrieval.groundtruth.exact import ground_truth
    from retrieval.tune import scale as sc
    from retrieval.tune.measure import Measurer
    from retrieval.tune.scale_run import sample_dataset
    from retrieval.tune.spec import checked_entries
    from retrieval.tune.worker import concurrent_plan

    conf = spec.tune.build_screen
    t_all = time.perf_counter()
    size = min(ds.n_base, max(MIN_ROWS, round(conf.fraction * ds.n_base)))
    candidates = [u for u in plan if screenable(u)]
    record: dict[str, Any] = {"fraction": conf.fraction, "at_n": size, "pruned": [],
                              "screened": len(candidates), "screen_build_s": 0.0,
                              "cost_margin": conf.cost_margin}
    if size >= ds.n_base or len(candidates) < 1:
        record["screen_s"] = time.perf_counter() - t_all
        return record
    rows = sc.nested_rows(ds.n_base, [size], spec.seed)[0]
    sds = sample_dataset(ds, rows)
    checked = checked_entries(spec)
    measured: list[dict[str, Any]] = []
    with Evaluator.for_spec(spec, sds, None, gt=ground_truth(sds, spec.k)) as ev:
        m = Measurer(ev, split, spec.modes, spec.target_recall, spec.tune.confidence, spec.seed)
        pool, threads = concurrent_plan(spec.tune.concurrent_builds, len(candidates),
                                        ev.build_threads)
        for start in range(0, len(candidates), pool):  # `pool` builds at once, then searched
            wave = candidates[start:start + pool]
            t0 = time.perf_counter()
            builts = _build_wave(ev, wave, checked, threads if pool > 1 else None)
            record["screen_build_s"] += time.perf_counter() - t0
            for u, built in zip(wave, builts, strict=True):
                try:
                    measured.append(_search(ev, m, checked[u.entry], u, built, split.tune))
                finally:
                    ev.release(built)
    costs = [r["cost_ms"] for r in measured if r["cost_ms"] is not None]
    best = min(costs) if costs else None
    for r in measured:
        u = r["unit"]
        reason = ("ceiling" if r["knob"] is None else
                  "cost" if best is not None and r["cost_ms"] > best * (1 + conf.cost_margin)
                  else None)
        if reason is None:
            continue
        record["pruned"].append({
            "unit": u.key, "label": u.label, "backend": u.backend, "build": dict(u.build),
            "reason": reason, "at_n": size, "ceiling": r["ceiling"], "knob": r["knob"],
            "knob_name": u.knob, "cost_ms": r["cost_ms"], "best_cost_ms": best})
        log.info("build screen: dropped %s %s at N=%d (%s)", u.label, u.build, size, reason)
    if record["pruned"] and len(record["pruned"]) == len(plan):  # nothing would be left
        record["kept_all"] = ("every candidate was dropped on the sample; none is dropped "
                              "(the sweep measures them all)")
        record["would_prune"], record["pruned"] = record["pruned"], []
    record["screen_s"] = time.perf_counter() - t_all
    return record


def _build_wave(ev: Any, wave: Sequence[Unit], checked: Any, threads: int | None) -> list[Any]:
    """The sample builds of ``wave``: one after another (``threads`` None) or all at once in
    threads of ``threads`` build threads each (``tune.concurrent_builds``)."""
    if threads is None:
        return [ev.build(u.backend, checked[u.entry].build(u.build)) for u in wave]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(wave), thread_name_prefix="rwb-screen") as ex:
        futures = [ex.submit(ev.build, u.backend, checked[u.entry].build(u.build),
                             build_threads=threads) for u in wave]
        return [f.result() for f in futures]


def _search(ev: Any, m: Any, entry: Any, u: Unit, built: Any, tune: Any) -> dict[str, Any]:
    """One candidate on the sample: its ceiling (a probe at the top of its range), then, when
    that meets, its cheapest knob meeting the target and the cost there."""
    probes: dict[int, Any] = {}

    def meets(v: int) -> bool:
        probes[v] = m.probe(built, entry.config(u.build, u.point(v)))
        return bool(probes[v].meets)

    top = meets(u.high)
    knob = tgt.solve(u.low, u.high, meets, {u.high: top}).value if top else None
    cost = None if knob is None else _cost_ms(ev, built, entry.config(u.build, u.point(knob)),
                                               tune)
    return {"unit": u, "ceiling": probes[u.high].recall_lb, "knob": knob, "cost_ms": cost}


def _cost_ms(ev: Any, built: Any, config: Any, queries: Any) -> float:
    """Batch ms per query of ``config``: the FASTEST of ``COST_REPEATS`` batch passes over the
    tuning queries after ``COST_WARMUP`` untimed ones (the fastest pass is the least disturbed
    by other work on the machine; a screening compares candidates, not latencies)."""
    saved = ev.batch_repeats, ev.warmup
    ev.batch_repeats, ev.warmup = COST_REPEATS, COST_WARMUP
    try:
        (meas,) = ev.measure(built, config, modes=["batch"], query_idx=queries,
                             query_set="tune")
    finally:
        ev.batch_repeats, ev.warmup = saved
    return float(np.min(meas.latency_ms)) / max(1, int(meas.n_queries))


def surviving(plan: Sequence[Unit], record: dict[str, Any] | None) -> list[Unit]:
    """The plan without the units the screening dropped."""
    gone = {p["unit"] for p in (record or {}).get("pruned") or []}
    return [u for u in plan if u.key not in gone]


__all__ = ["SCREEN_ATTR", "screen", "screenable", "surviving"]
