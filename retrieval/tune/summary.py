"""summary.json of ``rwb eval`` and ``rwb sweep`` (a sweep's computed from the study alone: any
worker writes the same one), and their typed models :class:`EvalSummary` / :class:`SweepSummary`
(written and read back through :meth:`retrieval.runs.RunDir.write_summary` / ``read_summary``).

Keys beyond ``rwb eval``'s: ``kind: "sweep"``, ``strategy``, ``target_recall``, ``objective``,
``confidence``, ``queries`` (the split), ``cheapest_rule``, ``builds`` (one entry per unit with
``chosen`` | null, ``evaluations``, ``heldout_recall``), ``backends`` (the cheapest build per
index entry), ``rows`` (every measured config) and ``pareto`` (both fronts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from retrieval.data import VectorDataset
from retrieval.indexes.registry import get_backend
from retrieval.params import validate_params
from retrieval.runs import RunKind, RunSummary, SummaryPart
from retrieval.tune import trials as tr
from retrieval.tune.config import Objective
from retrieval.tune.cost import with_costs
from retrieval.tune.decide import CHEAPEST_RULE, QuerySplit, rank_key, within_slo
from retrieval.tune.pareto import pareto
from retrieval.tune.results import PointResult, UnitResult
from retrieval.tune.spec import SweepSpec
from retrieval.tune.units import Unit

POINT_KEYS = (
    "recall", "recall_lb", "recall_tie", "recall_p5", "n_queries", "p50_ms", "p95_ms", "p99_ms",
    "qps", "build_s", "memory_bytes", "meets", "bytes_per_vector", "memory",
)


class EvalSummary(RunSummary):
    """summary.json of ``rwb eval``: one row per measured config (no ``kind`` key on disk)."""

    KIND: ClassVar[RunKind] = RunKind.EVAL

    run_id: str | None = None
    dataset: str | None = None
    dataset_fingerprint: str | None = None
    metric: str | None = None
    k: int | None = None
    recall_definition: str | None = None
    latency_unit: str | None = None
    rows: list[dict[str, Any]] = Field(default_factory=list)
    target_recall: float | None = None  # only when the spec has one


class ChosenPoint(SummaryPart):
    """The cheapest config meeting the target of one index entry (tuning queries)."""

    build: dict[str, Any] = Field(default_factory=dict)  # as the spec gave it
    build_params: dict[str, Any] = Field(default_factory=dict)  # every default filled in
    search: dict[str, Any] = Field(default_factory=dict)
    recall: float | None = None
    recall_lb: float | None = None
    recall_tie: float | None = None
    recall_p5: float | None = None
    n_queries: int | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    qps: float | None = None
    build_s: float | None = None
    memory_bytes: int | None = None
    meets: bool | None = None
    #: measured resident bytes per vector and the report it came from (retrieval.memory)
    bytes_per_vector: float | None = None
    memory: dict[str, Any] | None = None

    def point(self) -> PointResult:
        return PointResult.from_dict(self.to_json_dict())


class BackendChoice(SummaryPart):
    """``backends[label]``: the cheapest build of one index entry, or ``chosen: null``."""

    backend: str | None = None
    chosen: ChosenPoint | None = None
    unit: str | None = None
    evaluations: int | None = None
    builds: int | None = None
    heldout_recall: float | None = None
    heldout_recall_lb: float | None = None
    heldout_meets: bool | None = None
    #: monthly cost of the chosen point at the priced N (tune.cost; currency per month)
    cost: dict[str, Any] | None = None


class SweepSummary(RunSummary):
    """summary.json of ``rwb sweep`` (see the module doc for what each key holds)."""

    KIND: ClassVar[RunKind] = RunKind.SWEEP

    kind: RunKind = RunKind.SWEEP
    run_id: str | None = None
    name: str | None = None
    dataset: str | None = None
    dataset_fingerprint: str | None = None
    metric: str | None = None
    k: int | None = None
    strategy: str | None = None
    target_recall: float | None = None
    objective: Objective | None = None
    confidence: dict[str, Any] | None = None
    queries: dict[str, Any] | None = None
    recall_definition: str | None = None
    latency_unit: str | None = None
    cheapest_rule: str | None = None
    evaluations: int | None = None
    study: dict[str, Any] | None = None
    backends: dict[str, BackendChoice] = Field(default_factory=dict)
    builds: list[dict[str, Any]] = Field(default_factory=list)
    rows: list[dict[str, Any]] = Field(default_factory=list)
    pareto: list[dict[str, Any]] = Field(default_factory=list)
    slo_p95_ms: float | None = None
    this_worker: dict[str, Any] | None = None


def build_params(backend: str, build: Mapping[str, Any]) -> dict[str, Any]:
    """Every build param with defaults filled in, as the backend validated it."""
    cls = get_backend(backend)
    return validate_params(cls.BuildParams, build).model_dump(mode="json")


def point_doc(p: PointResult) -> dict[str, Any]:
    d = p.to_dict()
    return {"search": d["search"], **{k: d[k] for k in POINT_KEYS}}


def unit_doc(u: Unit, n_points: int, result: UnitResult | None) -> dict[str, Any]:
    held = result.heldout if result else None
    doc: dict[str, Any] = {
        "unit": u.key,
        "backend": u.backend,
        "label": u.label,
        "build": dict(u.build),
        "build_params": build_params(u.backend, u.build),
        "method": u.method,
        "knob": u.knob if u.method == "target" else None,
        "fixed_search": dict(u.fixed),
        "range": [u.low, u.high] if u.method == "target" else None,
        "max_evaluations": u.budget,
        "evaluations": result.evaluations if result else n_points,
        "done": result is not None,
        "infeasible": bool(result and result.infeasible),
        "chosen": point_doc(result.chosen) if result and result.chosen else None,
        "heldout_recall": held.recall if held else None,
        "heldout_recall_lb": held.recall_lb if held else None,
        "heldout_queries": held.n_queries if held else None,
        "heldout_meets": held.meets if held else None,
    }
    if result and result.extra:
        doc["note"] = dict(result.extra)
    return doc


def _rows(trials: list[Any], units: Mapping[str, Unit]) -> list[dict[str, Any]]:
    from optuna.trial import TrialState

    rows = []
    for t in trials:
        if t.state != TrialState.COMPLETE or tr.RESULT not in t.user_attrs:
            continue
        u = units[t.user_attrs[tr.UNIT]]
        p = PointResult.from_dict(t.user_attrs[tr.RESULT])
        rows.append({
            "trial": t.number,
            "unit": u.key,
            "backend": u.backend,
            "label": u.label,
            "build": dict(u.build),
            **point_doc(p),
            "timing": "full" if p.p95_ms is not None else "probe (one batch pass)",
        })
    return rows


def _best_per_label(builds: list[dict[str, Any]], objective: str,
                    slo_p95_ms: float | None = None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for label in dict.fromkeys(b["label"] for b in builds):
        mine = [b for b in builds if b["label"] == label]
        ok = [b for b in mine if b["chosen"] is not None
              and within_slo(PointResult.from_dict(b["chosen"]), slo_p95_ms)]
        best = min(
            ok,
            key=lambda b: rank_key(PointResult.from_dict(b["chosen"]), objective),  # type: ignore[arg-type]
            default=None,
        )
        out[label] = {
            "backend": mine[0]["backend"],
            "chosen": None if best is None else {
                "build": best["build"], "build_params": best["build_params"], **best["chosen"]
            },
            "unit": None if best is None else best["unit"],
            "evaluations": sum(b["evaluations"] for b in mine),
            "builds": len(mine),
            "heldout_recall": None if best is None else best["heldout_recall"],
            "heldout_recall_lb": None if best is None else best["heldout_recall_lb"],
            "heldout_meets": None if best is None else best["heldout_meets"],
        }
    return out


def build_summary(
    spec: SweepSpec,
    ds: VectorDataset,
    split: QuerySplit,
    book: tr.Book,
    *,
    run_id: str,
    storage: str,
    study_name: str,
) -> dict[str, Any]:
    trials = sorted(book.trials(), key=lambda t: t.number)
    units: dict[str, Unit] = {}
    for t in trials:
        if tr.UNIT_DEF in t.user_attrs:
            key = str(t.user_attrs[tr.UNIT])
            units.setdefault(key, tr.unit_from_dict(t.user_attrs[tr.UNIT_DEF]))
    done = book.done()
    rows = _rows(trials, units)
    n_points = Counter(r["unit"] for r in rows)
    ordered = sorted(units.items(), key=lambda kv: kv[1].entry)  # spec order, then first trial
    builds = [unit_doc(u, n_points[k], done.get(k)) for k, u in ordered]
    chosen_rows = [
        {"trial": None, "unit": b["unit"], "backend": b["backend"], "label": b["label"],
         "build": b["build"], **b["chosen"], "timing": "full (chosen)"}
        for b in builds if b["chosen"] is not None
    ]
    full_rows = [r for r in rows if r["timing"] == "full"]
    timed = {(r["unit"], repr(sorted(r["search"].items()))) for r in chosen_rows}
    probe_rows = [
        r for r in rows
        if r["timing"] != "full" and (r["unit"], repr(sorted(r["search"].items()))) not in timed
    ]
    tune = spec.tune
    states = Counter(t.state.name for t in trials)
    return {
        "kind": RunKind.SWEEP,
        "run_id": run_id,
        "name": spec.name,
        "dataset": ds.name,
        "dataset_fingerprint": ds.fingerprint,
        "metric": ds.metric,
        "k": spec.k,
        "strategy": tune.strategy,
        "target_recall": spec.target_recall,
        "objective": tune.objective,
        "confidence": tune.confidence.model_dump(),
        "queries": split.describe(),
        "recall_definition": "recall@k by id over the tuning queries (tie-aware in recall_tie)",
        "latency_unit": "ms, single-query mode; qps from batch mode",
        "cheapest_rule": CHEAPEST_RULE,
        "evaluations": len(rows),
        "study": {"storage": storage, "name": study_name, "trials": dict(states)},
        "backends": with_costs(_best_per_label(builds, tune.objective, tune.slo_p95_ms),
                               tune.cost, ds.n_base),
        "builds": builds,
        "rows": rows,
        "pareto": pareto(full_rows + chosen_rows + probe_rows),
        **({"slo_p95_ms": tune.slo_p95_ms} if tune.slo_p95_ms is not None else {}),
    }
