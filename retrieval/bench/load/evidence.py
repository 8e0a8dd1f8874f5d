"""The measured capacity at the SLO of a sweep's chosen config, for its exported evidence.

A ``rwb bench load`` run whose config was ``run: <sweep run directory>`` records that source
(``source_run``, ``source_run_id``, ``source_label``) with its capacity. :func:`capacity_for`
finds the newest such load run among the sweep run's sibling run directories (``runs/``), so
``rwb export`` can add "this config held p99 <= X ms up to Y QPS on this CPU" to the evidence.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def capacity_for(sweep_run: Path | str, run_id: str | None, label: str) -> dict[str, Any] | None:
    """The newest load measurement of entry ``label`` of sweep run ``sweep_run`` (a complete
    bench-load run beside it), or None when there is none."""
    sweep = Path(sweep_run).resolve()
    found: list[tuple[str, dict[str, Any]]] = []
    try:
        siblings = [p for p in sweep.parent.iterdir() if p.is_dir() and p != sweep]
    except OSError:
        return None
    for d in siblings:
        manifest = _read(d / "manifest.json")
        if manifest.get("kind") != "bench-load" or manifest.get("status") != "complete":
            continue
        summary = _read(d / "summary.json")
        for c in summary.get("configs") or []:
            same_run = c.get("source_run") == str(sweep) or (
                run_id is not None and c.get("source_run_id") == run_id)
            if not same_run or c.get("source_label") != label:
                continue
            found.append((str(manifest.get("created") or ""), {
                "capacity_qps": c.get("capacity_qps"),
                "first_fail_qps": c.get("first_fail_qps"),
                "limited_by": c.get("limited_by"),
                "slo": summary.get("slo"),
                "mode": "open loop, p99 corrected for coordinated omission (from the intended "
                        "send time)",
                "client": summary.get("client"),
                "clients": next((p.get("clients") for p in c.get("points") or []
                                 if p.get("mode") == "open"), None),
                "cpu": manifest.get("cpu"),
                "load_run_id": summary.get("run_id") or manifest.get("run_id") or d.name,
                "measured_at": manifest.get("created"),
            }))
    if not found:
        return None
    found.sort(key=lambda t: t[0])
    log.info("export: capacity at the SLO from load run %s", found[-1][1]["load_run_id"])
    return found[-1][1]


__all__ = ["capacity_for"]
