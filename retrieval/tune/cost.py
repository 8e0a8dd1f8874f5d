"""Cost in money of an operating point: measured bytes per vector x N vectors x a price per
GB-month (GB = 10**9 bytes) of RAM, plus its on-disk bytes x the price of disk.

Pure functions over summary rows; the prices and N come from the spec's ``tune.cost``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from retrieval.tune.config import CostSpec

GB = 1e9

log = logging.getLogger(__name__)


def monthly_cost(point: Mapping[str, Any], cost: CostSpec, n: int) -> dict[str, Any] | None:
    """``{"n", "ram_gb", "disk_gb", "ram_per_month", "disk_per_month", "per_month"}`` of a chosen
    point holding ``n`` vectors, or None when it has no measured bytes per vector."""
    bpv = point.get("bytes_per_vector")
    if bpv is None:
        return None
    mem = point.get("memory") or {}
    built_n = mem.get("n") or 0
    disk_bpv = (mem.get("disk_bytes") or 0) / built_n if built_n else 0.0
    ram_gb, disk_gb = float(bpv) * n / GB, disk_bpv * n / GB
    ram, disk = ram_gb * cost.ram_gb_month, disk_gb * cost.disk_gb_month
    return {"n": n, "ram_gb": ram_gb, "disk_gb": disk_gb, "ram_per_month": ram,
            "disk_per_month": disk, "per_month": ram + disk,
            "prices": cost.model_dump(exclude={"n"})}


def with_costs(backends: dict[str, dict[str, Any]], cost: CostSpec | None,
               n_default: int) -> dict[str, dict[str, Any]]:
    """``backends`` (label -> choice) with ``cost`` added to each chosen point (at ``cost.n``,
    else ``n_default`` vectors); unchanged without prices."""
    if cost is None:
        return backends
    n = cost.n or n_default
    out = {}
    unpriced = []
    for label, b in backends.items():
        chosen = b.get("chosen")
        priced = None if chosen is None else monthly_cost(chosen, cost, n)
        if chosen is not None and priced is None:
            unpriced.append(label)
        out[label] = {**b, "cost": priced}
    if unpriced:  # a setting that cannot apply is said, not silently ignored
        log.warning("tune.cost: no monthly cost for %s: the chosen point has no measured bytes "
                    "per vector (set tune.memory: resident, or objective bytes_per_vector, "
                    "to measure it)", ", ".join(unpriced))
    return out


def with_costs_at(backends: dict[str, dict[str, Any]], cost: CostSpec | None, full_n: int,
                  multiples: list[float]) -> dict[str, dict[str, Any]]:
    """``backends`` with ``cost_at`` added to each chosen point: its monthly cost at each
    ``multiple`` x ``full_n`` vectors (the scale study's ``predict_at``), at the same measured
    bytes per vector (the knob predicted there may grow the graph; bytes/vector is the figure
    measured at ``full_n``). Unchanged without prices."""
    if cost is None:
        return backends
    out = {}
    for label, b in backends.items():
        chosen = b.get("chosen")
        at = [] if chosen is None else [
            {"multiple": m, **c} for m in multiples
            if (c := monthly_cost(chosen, cost, round(m * full_n))) is not None]
        out[label] = {**b, "cost_at": at or None}
    return out
