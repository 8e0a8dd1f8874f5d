"""What a sweep records: one :class:`PointResult` per measured config (an Optuna trial) and one
:class:`UnitResult` per unit of work (a build config with its decision).

Both are frozen and round-trip through plain JSON (Optuna user attrs, summary.json).
Units: latencies in milliseconds (single-query mode), throughput in queries per second (batch
mode), build time in seconds, memory in bytes; recall is recall@k by id over the tuning queries.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


@dataclass(frozen=True)
class PointResult:
    """One search config measured on one build (tuning queries).

    ``recall_lb``: lower confidence bound on mean recall; ``meets``: ``recall_lb >= target``
    (None without a target).
    """

    search: dict[str, Any]
    recall: float
    recall_lb: float
    recall_tie: float
    recall_p5: float
    n_queries: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    qps: float | None
    build_s: float
    memory_bytes: int | None
    meets: bool | None
    #: what a workload records beside the common figures (a filtered step: its ``row``)
    extra: dict[str, Any] = field(default_factory=dict)
    #: measured resident bytes / vectors (None unless the sweep measures memory)
    bytes_per_vector: float | None = None
    #: the build's :class:`retrieval.memory.MemoryReport` as a dict (where the figure came from)
    memory: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.extra:
            out.pop("extra")
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PointResult:
        names = {f.name for f in fields(cls)}
        data = {k: v for k, v in d.items() if k in names}
        for key in ("p50_ms", "p95_ms", "p99_ms", "qps"):
            data[key] = _num(data.get(key))
        return cls(**data)


@dataclass(frozen=True)
class HeldOut:
    """The chosen config re-measured on the held-out queries (never used for choosing).
    ``meets``: the held-out mean recall is >= the target (``recall_lb`` is its own bound)."""

    recall: float
    recall_lb: float
    n_queries: int
    meets: bool | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeldOut:
        return cls(**{k: d[k] for k in ("recall", "recall_lb", "n_queries", "meets")})


@dataclass(frozen=True)
class UnitResult:
    """The decision for one unit (a build config, with its fixed non-knob search params).

    ``evaluations``: configs measured for this unit; ``infeasible``: the most accurate setting
    already missed the target; ``chosen``: the cheapest config meeting the target, or None.
    """

    chosen: PointResult | None
    evaluations: int
    infeasible: bool
    heldout: HeldOut | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen.to_dict() if self.chosen else None,
            "evaluations": self.evaluations,
            "infeasible": self.infeasible,
            "heldout": self.heldout.to_dict() if self.heldout else None,
            "error": self.error,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UnitResult:
        chosen = d.get("chosen")
        held = d.get("heldout")
        return cls(
            chosen=PointResult.from_dict(chosen) if chosen else None,
            evaluations=int(d.get("evaluations", 0)),
            infeasible=bool(d.get("infeasible", False)),
            heldout=HeldOut.from_dict(held) if held else None,
            error=d.get("error"),
            extra=dict(d.get("extra") or {}),
        )
