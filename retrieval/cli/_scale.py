"""Printing the summary of a scale study (``rwb sweep`` of a spec with ``scale:``)."""

from __future__ import annotations

from typing import Any

from retrieval.cli._common import fmt, print_table
from retrieval.cli.printers import prints
from retrieval.runs import WORKLOAD_SCALE


def _num(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


def _pct(v: Any) -> str:
    return "-" if v is None else f"{100 * float(v):+.0f}%"


def _used(b: dict[str, Any]) -> str:
    """The model the study used for a build (``model_used``: the full-N search started from its
    knob), its knob and its transfer error, e.g. ``partition 13 (+0%)``."""
    key = b.get("model_used")
    if not key or b.get(key) is None:
        return "-"
    err = b.get(str(key).replace("predicted", "transfer_error", 1))
    return f"{str(key).removeprefix('predicted_')} {b[key]} ({_pct(err)})"


@prints("sweep", WORKLOAD_SCALE)
def print_scale(s: dict[str, Any], run_dir: str, as_json: bool = False) -> None:
    sc = s["scale"]
    k, target = s["k"], s["target_recall"]
    print(f"{s['name']} on {s['dataset']} (k={k}): scale study, target recall@{k} >= {target}; "
          f"samples N = {', '.join(f'{n:,}' for n in sc['sizes'])}; full N = {sc['full_n']:,}")
    rows: list[tuple[Any, ...]] = []
    for b in s["builds"]:
        build = ",".join(f"{key}={fmt(v)}" for key, v in b["build"].items()) or "-"
        knobs = " ".join("x" if r["knob"] is None else str(r["knob"]) for r in b["samples"])
        f = b.get("fit") or {}
        band = b.get("band")
        held = (b.get("predicted_recall") or {}).get("heldout_lb")
        rows.append((b["label"], build, b["knob"], knobs, f.get("model", "-"),
                     fmt(b["predicted"]), "-" if not band else f"{band[0]}-{band[1]}",
                     fmt(b["exact"]), _pct(b["transfer_error"]), _used(b), _num(held),
                     _num(b["ceiling"]) + ("" if b.get("ceiling_measured") else " (pred)")))
    print_table(rows, ["index", "build", "knob", "knob at samples", "model", "predicted",
                       "band", "exact", "transfer", "used model (transfer)", "held-out lb",
                       "ceiling"])
    for b in s["builds"]:
        for p in b.get("predicted_at") or []:
            if p.get("trust"):  # one figure (the export's) and whether to trust it there
                print(f"  {b['label']} {b['knob']} {p['trust']}; ceiling {_num(p['ceiling'])}")
                continue
            print(f"  {b['label']} {b['knob']} at {p['multiple']:g}x N ({p['n']:,}): "
                  f"{p['knob']} (band {p['band'][0]}-{p['band'][1]}), ceiling "
                  f"{_num(p['ceiling'])}")
    for line in sc.get("messages") or []:
        print(line)
    cost = sc.get("cost_s") or {}
    print(f"cost: samples {_num(cost.get('samples_s'), 1)} s, full N "
          f"{_num(cost.get('full_s'), 1)} s, ground truth {_num(cost.get('groundtruth_s'), 1)} s")
    print(f"run: {run_dir}")
