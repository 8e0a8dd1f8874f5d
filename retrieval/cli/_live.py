"""Printing a live sweep (``rwb sweep LIVE-SPEC``): the probes, the chosen knob, the budget spent,
the query shift; queries sampled from the collection are labelled on every table."""

from __future__ import annotations

import sys
from typing import Any

from retrieval.cli._common import fmt, print_table
from retrieval.cli.printers import prints, strict_checks
from retrieval.runs import WORKLOAD_LIVE


@strict_checks("sweep", WORKLOAD_LIVE)
def strict_live_sweep(s: dict[str, Any]) -> int:
    """--strict of a live sweep: 1 (one line on stderr) when no knob value meets the target or
    the chosen one misses it on the held-out queries."""
    if s.get("chosen") is None or s.get("heldout_meets") is False:
        why = ("misses the target on the held-out queries" if s.get("chosen")
               else "has no knob value meeting the target")
        print(f"rwb sweep: --strict: the live collection {why}", file=sys.stderr)
        return 1
    return 0


@prints("sweep", WORKLOAD_LIVE)
def print_live_sweep(s: dict[str, Any], path: str, as_json: bool = False) -> None:
    live = s.get("live") or {}
    desc = live.get("description") or {}
    knob = s.get("knob") or {}
    print(f"live {s.get('engine')} collection {s.get('collection')}: {desc.get('rows')} rows, "
          f"dim {desc.get('dim')}, metric {desc.get('metric')}, index {desc.get('index_kind')} "
          f"{fmt(desc.get('build_params') or {})}")
    if live.get("untested"):
        print(f"NOTE: {live['untested']}")
    seg = live.get("segments") or {}
    if seg.get("lab_segments") is not None:
        knobs = ", ".join(f"{k.get('label')} {k.get('knob_name')}={k.get('knob')} "
                          f"({k.get('source')})" for k in seg.get("knobs") or [])
        print(f"segments: the collection has {seg.get('collection_segments')}, the lab "
              f"topology run measured {seg.get('lab_segments')}; lab knob here: {knobs}")
    if seg.get("collection_segments") is None and seg.get("segments_source"):
        print(f"segments: {seg['segments_source']}")
    if seg.get("warning"):
        print(f"WARNING: {seg['warning']}")
    q = s.get("queries") or {}
    label = " [NOT PRODUCTION TRAFFIC: sampled from the collection]" \
        if live.get("not_production_traffic") else ""
    print(f"queries: {q.get('source')} ({q.get('tuning')} tuning, {q.get('heldout')} held "
          f"out){label}")
    rows = [[p.get("kind"), p["search"].get(knob.get("name")), p.get("recall"),
             p.get("recall_lb"), p.get("p50_ms"), p.get("p95_ms"), p.get("meets")]
            for p in s.get("probes") or []]
    print_table(rows, ["probe", knob.get("native", "knob"), "recall", "recall_lb", "p50_ms",
                       "p95_ms", "meets"])
    chosen = s.get("chosen")
    if chosen:
        print(f"chosen: {fmt(chosen.get('native') or {})} (recall {fmt(chosen.get('recall'))}, "
              f"lower bound {fmt(chosen.get('recall_lb'))} >= target {s.get('target_recall')}); "
              f"held-out recall {fmt(s.get('heldout_recall'))}{label}")
    else:
        print(f"chosen: none ({s.get('miss') or 'stopped before a choice'})")
    spent = live.get("spent") or {}
    print(f"budget: {spent.get('live_queries')} live searches in {fmt(spent.get('wall_s'))} s "
          f"(max_qps {(live.get('budget') or {}).get('max_qps')})"
          + (f"; STOPPED: {live['budget_exhausted']}" if live.get("budget_exhausted") else ""))
    snap = live.get("snapshot")
    if snap:
        print(f"snapshot: {snap.get('rows')} rows, {fmt(snap.get('rows_per_s'))} rows/s, "
              f"fingerprint {snap.get('fingerprint')}")
    shift = live.get("query_shift")
    if shift:
        print(f"query shift: lab {shift.get('knob')} {shift.get('lab_knob')}, production "
              f"{shift.get('production_knob')}, inflation x{fmt(shift.get('inflation_factor'))}; "
              f"{shift.get('needs_over_twice_lab_knob')}/{shift.get('n_queries')} queries need "
              f"> 2x the lab knob; OOD score AUROC {fmt(shift.get('ood_auroc'))}")
    print(f"run: {path}")
