"""The capacity search (pure): the highest offered rate (QPS) whose point meets the SLO, found by
growing the rate geometrically until a point fails, then bisecting between the last passing and
the first failing rate (in log space) until they are within ``rel_tol`` of each other or the
step budget is spent. Not a fixed grid: where it measures depends on what it found.

``measure(rate) -> row`` runs one open-loop point; ``passes(row) -> bool`` says whether it meets
the SLO. The search stops early when a point is ``partial`` (the run was aborted) or the load
generator could not keep the schedule (``generator_ok`` false): then the capacity is only a lower
bound, and the result says why (``limited_by``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Row = Mapping[str, Any]


@dataclass(frozen=True)
class CapacityResult:
    """``capacity_qps``: highest passing offered rate found (None: even ``start`` failed);
    ``first_fail_qps``: the lowest failing rate found (None: never failed up to ``max_qps``);
    ``limited_by``: "slo" | "max_qps" | "generator" | "aborted" | "steps"; ``rows``: every
    measured point in the order measured."""

    capacity_qps: float | None
    first_fail_qps: float | None
    limited_by: str
    rows: list[dict[str, Any]] = field(default_factory=list)


def search_capacity(measure: Callable[[float], dict[str, Any]], passes: Callable[[Row], bool],
                    *, start_qps: float, max_qps: float, growth: float = 2.0,
                    steps: int = 8, rel_tol: float = 0.1) -> CapacityResult:
    """See the module docstring. ``steps``: the most points measured in all."""
    if not start_qps > 0 or not max_qps >= start_qps or not growth > 1 or steps < 1:
        raise ValueError(
            f"need 0 < start_qps <= max_qps, growth > 1, steps >= 1; received start_qps="
            f"{start_qps}, max_qps={max_qps}, growth={growth}, steps={steps}")
    rows: list[dict[str, Any]] = []
    good: float | None = None
    bad: float | None = None
    rate = float(start_qps)

    def run(r: float) -> tuple[bool, str | None]:
        row = dict(measure(r))
        row["search_step"] = len(rows)
        row["meets_slo"] = bool(passes(row))
        rows.append(row)
        if row.get("partial"):
            return False, "aborted"
        if not row.get("generator_ok", True):
            return False, "generator"
        return row["meets_slo"], None

    # grow
    while len(rows) < steps:
        ok, stop = run(rate)
        if stop:
            return CapacityResult(good, bad, stop, rows)
        if not ok:
            bad = rate
            break
        good = rate
        if rate >= max_qps:
            return CapacityResult(good, None, "max_qps", rows)
        rate = min(rate * growth, float(max_qps))
    if bad is None:
        return CapacityResult(good, None, "steps", rows)
    if good is None:
        return CapacityResult(None, bad, "slo", rows)
    # bisect (geometric mean of the bracket)
    while len(rows) < steps and bad / good > 1 + rel_tol:
        mid = math.sqrt(good * bad)
        ok, stop = run(mid)
        if stop:
            return CapacityResult(good, bad, stop, rows)
        if ok:
            good = mid
        else:
            bad = mid
    return CapacityResult(good, bad, "slo", rows)


__all__ = ["CapacityResult", "search_capacity"]
