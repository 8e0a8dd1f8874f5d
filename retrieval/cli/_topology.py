"""Printing a topology study (``rwb sweep`` of a spec with ``topology:``) and a cold run
(``cold: true``)."""

from __future__ import annotations

from typing import Any

from retrieval.cli._common import fmt, print_table
from retrieval.cli.printers import prints
from retrieval.runs import WORKLOAD_COLD, WORKLOAD_TOPOLOGY


def _num(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


@prints("sweep", WORKLOAD_TOPOLOGY)
def print_topology(s: dict[str, Any], run_dir: str, as_json: bool = False) -> None:
    info = s.get("topology_info") or {}
    print(f"{s['name']} on {s['dataset']} (k={s['k']}): topology study, target recall@{s['k']} "
          f">= {s['target_recall']}; segments {', '.join(map(str, info.get('segments', [])))}")
    rows = []
    for r in s.get("topology") or []:
        m = r.get("maintain") or {}
        rows.append((r["label"], r["segments"], r.get("segmented") or "-",
                     fmt(r.get("segments_reported")), r["segment_size"], fmt(r["knob"]),
                     fmt(r.get("rule_knob")), _num(r["recall"]), _num(r["recall_p5"]),
                     _num(r["recall_lower"]), _num(r["p50_ms"]), _num(r["p99_ms"]),
                     _num(m.get("recall_change")), m.get("step", "-").split(" ")[0]))
    print_table(rows, ["index", "segments", "as", "reported", "segment size", "knob",
                       "rule knob", "recall", "recall p5", "recall lb", "p50 ms", "p99 ms",
                       "merge Δrecall", "merge step"])
    notes = {r["label"]: r["segments_note"] for r in s.get("topology") or []
             if r.get("segmented") == "native" and r.get("segments_note")}
    for label, note in notes.items():
        print(f"{label}: native segments: {note}")
    for line in [*(info.get("messages") or []), info.get("segments_warning")]:
        if line:
            print(line)
    print(f"run: {run_dir}")


@prints("sweep", WORKLOAD_COLD)
def print_cold(s: dict[str, Any], run_dir: str, as_json: bool = False) -> None:
    info = s.get("cold_info") or {}
    print(f"{s['name']} on {s['dataset']} (k={s['k']}): cold run")
    rows = []
    for r in s.get("cold") or []:
        rows.append((r["label"], fmt(r["search"]), _num(r["cold_p99_ms"]),
                     _num(r["warm_p99_ms"]), fmt(r["queries_to_warm"]), _num(r["recall_lower"]),
                     r["drop_method"]))
        for b in r.get("budgets") or []:
            rows.append((f"  budget {b['budget']:.0%}", "", _num(b["cold_p99_ms"]),
                         _num(b["warm_p99_ms"]), fmt(b["queries_to_warm"]),
                         _num(b["recall_lower"]), b.get("method", "fadvise-window")))
    print_table(rows, ["index", "search", "cold p99 ms", "warm p99 ms", "queries to warm",
                       "recall lb", "drop"])
    print(info.get("definitions", ""))
    if any(r.get("budgets") for r in s.get("cold") or []):
        print(f"RAM budgets: {info.get('budget_method', '')}")
    for r in s.get("cold") or []:
        if r.get("drop_reason"):  # what the drop could not do (a server rwb did not start)
            print(f"{r['label']}: {r['drop_reason']}")
        for b in r.get("budgets") or []:
            if b.get("served") is False:
                print(f"{r['label']} at budget {b['budget']:.0%}: {b.get('why')}")
    print(f"run: {run_dir}")
