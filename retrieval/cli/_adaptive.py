"""Printing the ``adaptive`` entries of a summary (sweep, ``rwb tune cache``): one row per
policy with its cost, quality and the tuned fixed setting at the same quality, then each
verdict on its own line (it says plainly when the fixed setting wins)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval.cli._common import print_table


def _n(v: Any, digits: int = 4) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


def print_adaptive(entries: Sequence[dict[str, Any]] | None) -> None:
    """The adaptive policies of a summary (nothing when it has none)."""
    if not entries:
        return
    unit = next((e.get("cost_unit") for e in entries if e.get("cost_unit")), "cost")
    print(f"\nadaptive policies vs the tuned fixed setting at the same quality (held-out; "
          f"cost: {unit}, per query; lower is cheaper)")
    rows = []
    for e in entries:
        vs = e.get("vs_fixed") or {}
        fixed = "-" if vs.get("value") is None else f"{vs.get('knob')}={vs.get('value')}"
        rows.append((e.get("label") or "-", e.get("policy"), _n(e.get("cost"), 1),
                     _n(e.get("mean")), _n(e.get("p5")), fixed, _n(vs.get("cost"), 1),
                     _n(vs.get("ratio"), 3), vs.get("winner") or "-"))
    print_table(rows, ["index", "policy", "cost", "mean", "p5", "fixed", "fixed cost",
                       "ratio", "winner"])
    for e in entries:
        line = e.get("skipped") or (e.get("vs_fixed") or {}).get("verdict")
        if line:
            print(f"{e.get('label') or e.get('policy')} {e.get('policy')}: {line}")
