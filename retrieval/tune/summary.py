"""summary.json of ``rwb eval`` and ``rwb sweep`` (a sweep's computed from the study alone: any
worker writes the same one), and their typed models :class:`EvalSummary` / :class:`SweepSummary`
(written and read back through :meth:`retrieval.runs.RunDir.write_summary` / ``read_summary``).

Keys beyond ``rwb eval``'s: ``kind: "sweep"``, ``strategy``, ``target_recall``, ``objective``,
``confidence``, ``queries`` (the split), ``cheapest_rule``, ``builds`` (one entry per unit with
``chosen`` | null, ``evaluations``, ``heldout_recall``), ``backends`` (the cheapest build per
index entry), ``rows`` (every measured config) and ``pareto`` (both fronts). ``node_hours`` (in
``builds`` and ``backends``): wall hours workers spent on the unit's points (build, measurement,
decision) wherever they ran; a backend's is the sum over its builds, the cost of finding its
configuration. Time lost with a killed worker is not counted. ``quality`` (a spec with
``target: {ndcg_non_inferior: M}``, :mod:`retrieval.tune.quality`): ``knob_recall``,
``knob_quality``, ``agree`` and both knobs' nDCG@10, test and costs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from retrieval.adaptive.result import AdaptiveEntry
from retrieval.data import VectorDataset
from retrieval.indexes.registry import get_backend
from retrieval.params import validate_params
from retrieval.runs import (
    WORKLOAD_FILTERED,
    WORKLOADS,
    RunKind,
    RunSummary,
    SummaryPart,
    run_summary,
)
from retrieval.tune import trials as tr
from retrieval.tune.bucket_summary import CLIFF_RULE, cliffs, filter_summary, operating_points
from retrieval.tune.config import Objective
from retrieval.tune.cost import with_costs
from retrieval.tune.decide import CHEAPEST_RULE, QuerySplit, rank_key, within_slo
from retrieval.tune.derived import (
    CHECK_ATTR,
    DOMINATED_ATTR,
    SCREEN_ATTR,
    answer_of,
    build_cost,
    checks_of,
    derivation_plan,
)
from retrieval.tune.pareto import pareto
from retrieval.tune.quality import quality_section
from retrieval.tune.results import PointResult, UnitResult
from retrieval.tune.spec import SweepSpec
from retrieval.tune.subset import subset_summary
from retrieval.tune.units import Unit

POINT_KEYS = (
    "recall", "recall_lb", "recall_tie", "recall_p5", "n_queries", "p50_ms", "p95_ms", "p99_ms",
    "qps", "build_s", "memory_bytes", "meets", "bytes_per_vector", "memory",
)



def _known_workload(value: str) -> str:
    """``value`` when it names a workload shape (:data:`retrieval.runs.WORKLOADS`) or a
    registered workload kind (:mod:`retrieval.tune.workloads`)."""
    from retrieval.tune.workloads import workload_kinds

    allowed = dict.fromkeys((*WORKLOADS, *workload_kinds()))
    if value not in allowed:
        raise ValueError(f"unknown workload '{value}'; allowed: {', '.join(allowed)}")
    return value


#: the workload shapes a sweep or eval summary declares (``workload``): a built-in shape or a
#: registered workload kind
Workload = Annotated[str, AfterValidator(_known_workload)]


@run_summary
class EvalSummary(RunSummary):
    """summary.json of ``rwb eval``: one row per measured config (no ``kind`` key on disk)."""

    KIND: ClassVar[RunKind] = RunKind("eval")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("rows", "dataset")
    RANK: ClassVar[int] = 0
    RETARGETS: ClassVar[bool] = True

    run_id: str | None = None
    dataset: str | None = None
    dataset_fingerprint: str | None = None
    metric: str | None = None
    k: int | None = None
    recall_definition: str | None = None
    latency_unit: str | None = None
    rows: list[dict[str, Any]] = Field(default_factory=list)
    target_recall: float | None = None  # only when the spec has one
    workload: Workload | None = None  # set for a filtered run only
    scale: ScaleSection | None = None  # a scale study only


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
    #: scale study only: the index into ``builds`` of the chosen build (its fitted rule)
    scale_build: int | None = None
    node_hours: float | None = None  # wall hours spent on every build of this entry
    #: monthly cost of the chosen point at the priced N (tune.cost; currency per month)
    cost: dict[str, Any] | None = None
    #: scale study only: the same point's monthly cost at each ``predict_at`` multiple of N
    cost_at: list[dict[str, Any]] | None = None


class ScaleSection(SummaryPart):
    """``scale`` of a scale study (``workload: scale``): the sample sizes, the collection size
    ``full_n``, the sizes a rule predicts at, the fitted knob(N) rules per build, the check at
    full N, the answer and the cost (s)."""

    sizes: list[Any] = Field(default_factory=list)
    full_n: int | None = None
    predict_at: list[Any] = Field(default_factory=list)
    build_rules: dict[str, Any] = Field(default_factory=dict)
    rule: str | None = None
    cost_s: dict[str, Any] = Field(default_factory=dict)
    check: Any = None
    #: the knob(N) models of each ``builds`` entry by their keys (predicted, transfer_error,
    #: fit) and ``start``: the key whose knob the local search at the full N starts from
    models: dict[str, Any] | None = None
    answer: Any = None
    messages: list[str] = Field(default_factory=list)


class QualityPoint(SummaryPart):
    """One knob of a quality target's comparison (``quality.recall`` / ``quality.quality``):
    ``value``, its mean ``quality.metric`` (0..1, judged tuning queries), the paired test
    against exact search, and its cost: ``distance_computations`` per query (None where the
    engine does not count them) and ``p50_ms`` (single-query, ms)."""

    search: dict[str, Any] = Field(default_factory=dict)
    knob_value: int | None = None
    value: float | None = None  # the metric's mean (``quality.metric``, e.g. nDCG@10)
    n_queries: int | None = None
    mean_diff: float | None = None
    sd: float | None = None
    lower_bound: float | None = None
    p_value: float | None = None
    non_inferior: bool | None = None
    distance_computations: float | None = None
    p50_ms: float | None = None
    recall: float | None = None


class QualitySection(SummaryPart):
    """``quality`` of a sweep with ``target: {ndcg_non_inferior: M}`` (retrieval.tune.quality):
    the recall choice's knob ``knob_recall`` beside the cheapest knob non-inferior in nDCG@10
    ``knob_quality``, ``agree`` (the same knob), both knobs' costs, for the first index entry
    (``label``) and per entry in ``by_index``."""

    metric: str | None = None
    margin: float | None = None
    alpha: float | None = None
    test: str | None = None
    reference: str | None = None
    distance_unit: str | None = None
    latency_unit: str | None = None
    label: str | None = None
    knob: str | None = None
    knob_recall: int | None = None
    knob_quality: int | None = None
    agree: bool | None = None
    exact: float | None = None  # exact search's mean of ``metric``
    n_queries: int | None = None
    recall: QualityPoint | None = None
    quality: QualityPoint | None = None
    by_index: dict[str, dict[str, Any]] = Field(default_factory=dict)


@run_summary
class SweepSummary(RunSummary):
    """summary.json of ``rwb sweep`` (see the module doc for what each key holds)."""

    KIND: ClassVar[RunKind] = RunKind("sweep")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("builds", "backends", "pareto")
    RANK: ClassVar[int] = 1

    kind: RunKind = KIND
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
    workload: Workload | None = None  # set for a filtered run and a scale study
    scale: ScaleSection | None = None  # a scale study only
    quality: QualitySection | None = None  # a quality target only (``target`` in the spec)
    #: adaptive policies judged against the tuned fixed setting (spec ``adaptive:`` only)
    adaptive: list[AdaptiveEntry] | None = None


def missed_labels(s: Mapping[str, Any]) -> list[str]:
    """Index labels of a sweep summary with no config meeting the target (none when the sweep
    had no target)."""
    if s.get("target_recall") is None:
        return []
    return [label for label, b in (s.get("backends") or {}).items() if b.get("chosen") is None]


def miss_hint(s: Mapping[str, Any], label: str) -> str:
    """What to change when ``label`` has no config meeting the target: a grid's best listed
    value and a wider list (or ``--strategy target``); a target search's range top and a wider
    ``tune.search_range``. One line."""
    target = s.get("target_recall")
    mine = [r for r in s.get("rows") or [] if r.get("label") == label
            and r.get("recall_lb") is not None]
    best = max(mine, key=lambda r: (r["recall_lb"], r["recall"]), default=None)
    seen = "nothing measured" if best is None else (
        "best measured: " + (",".join(f"{k}={v}" for k, v in best["search"].items()) or "-")
        + f" recall {best['recall']:.4f} (lower bound {best['recall_lb']:.4f})")
    tie = None if best is None else best.get("recall_tie")
    if best is not None and tie is not None and target is not None and tie >= target \
            and tie - best["recall"] >= 0.1:
        return (f"{seen}; the base is degenerate: tie-aware recall is {tie:.4f} (the exact "
                f"neighbours' distances are tied: all-zero or duplicate vectors, or magnitudes "
                f"that overflow float32), so no setting can raise recall by id: check the data "
                f"(widening the range will not help)")
    builds = [b for b in s.get("builds") or [] if b.get("label") == label]
    ranged = [b for b in builds if b.get("method") == "target" and b.get("range")]
    if ranged:
        knobs = sorted({f"{b['knob']} [{b['range'][0]}, {b['range'][1]}]" for b in ranged})
        return (f"{seen}; the search reached the top of its range ({', '.join(knobs)}) below "
                f"target {target}: widen tune.search_range (or build a denser index)")
    return (f"{seen}; the grid's most accurate listed value misses target {target}: list larger "
            f"search values, or run --strategy target (searches up to the backend's most "
            f"accurate setting, tune.search_range)")


def build_params(backend: str, build: Mapping[str, Any]) -> dict[str, Any]:
    """Every build param with defaults filled in, as the backend validated it."""
    cls = get_backend(backend)
    return validate_params(cls.BuildParams, build).model_dump(mode="json")


def point_doc(p: PointResult) -> dict[str, Any]:
    d = p.to_dict()
    return {"search": d["search"], **{k: d[k] for k in POINT_KEYS}}


def unit_doc(
    u: Unit, n_points: int, result: UnitResult | None, node_s: float | None = None
) -> dict[str, Any]:
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
        "node_hours": None if node_s is None else node_s / 3600.0,
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
            "node_hours": _total([b.get("node_hours") for b in mine]),
        }
    return out


def _total(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def node_seconds(trials: list[Any]) -> dict[str, float]:
    """Wall seconds recorded on the finished trials of each unit (:data:`trials.NODE_S`)."""
    out: dict[str, float] = {}
    for t in trials:
        ua = t.user_attrs
        if tr.NODE_S in ua and tr.UNIT in ua:
            out[str(ua[tr.UNIT])] = out.get(str(ua[tr.UNIT]), 0.0) + float(ua[tr.NODE_S])
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
    spent = node_seconds(trials)
    builds = [unit_doc(u, n_points[k], done.get(k), spent.get(k)) for k, u in ordered]
    derivations = (derivation_plan(list(units.values()))
                   if spec.tune.build_search == "derived" else {})
    for b in builds:
        src = derivations.get(b["unit"])
        b["derived_from"] = None if src is None else dict(src.build)
    for r in rows:
        src = derivations.get(r["unit"])
        r["derived_from"] = None if src is None else dict(src.build)
    checks = checks_of(book.attrs().get(CHECK_ATTR))
    reranks = bool(checks) and all(c.get("unit") is not None for c in checks)
    answer = answer_of(builds, spec.tune.objective, spec.tune.slo_p95_ms,
                       checks if reranks else (), real_only=reranks)
    if answer is not None and checks and reranks:
        answer["checks"] = checks
        answer["reranked"] = str(answer["unit"]) != str(checks[0]["unit"])
    elif answer is not None and checks:  # a run recorded before re-ranking: one check
        answer["check"] = checks[0]
        answer.update(search=checks[0]["search_after_check"],
                      recall_lb=checks[0]["recall_lb_after_check"])
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
    backends = with_costs(_best_per_label(builds, tune.objective, tune.slo_p95_ms),
                          tune.cost, ds.n_base)
    quality = ({} if spec.target is None
               else {"quality": quality_section(spec.target, backends, builds)})
    return {
        "kind": SweepSummary.KIND,
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
        "backends": backends,
        "builds": builds,
        "rows": rows,
        "pareto": pareto(full_rows + chosen_rows + probe_rows),
        **({"slo_p95_ms": tune.slo_p95_ms} if tune.slo_p95_ms is not None else {}),
        "build_search": tune.build_search,
        **_with_dominated(_with_screen(build_cost(builds, rows, checks),
                                       book.attrs().get(SCREEN_ATTR)),
                          book.attrs().get(DOMINATED_ATTR)),
        "answer": answer,
        **({"query_subset": subset_summary(builds, tune.query_subset)}
           if tune.query_subset < 1.0 else {}),
        **quality,
    }


def _with_dominated(cost: dict[str, Any], records: Any) -> dict[str, Any]:
    """tune.dominated_builds: skip: the builds not built because a larger dominant param
    (HNSW's ``ef_construction``) of the same build was, first in ``pruned``
    (``reason: dominated``, ``dominated_by``), and ``builds_dominated``."""
    if not records:
        return cost
    return {**cost, "pruned": list(records) + list(cost.get("pruned") or []),
            "builds_dominated": len(records)}


def _with_screen(cost: dict[str, Any], record: Mapping[str, Any] | None) -> dict[str, Any]:
    """tune.build_screen: ``pruned`` (the candidates dropped on the sample) and ``build_screen``
    (the sample's size, what it cost); the screening builds count in ``build_cost_s``."""
    if record is None:
        return cost
    screen_s = float(record.get("screen_build_s") or 0.0)
    return {**cost, "build_cost_s": cost["build_cost_s"] + screen_s,
            "pruned": list(record.get("pruned") or []),
            "build_screen": {k: v for k, v in record.items() if k != "pruned"}}


def build_filtered_summary(
    spec: SweepSpec, ds: VectorDataset, split: QuerySplit, book: tr.Book, plan: list[Unit],
    buckets: list[Any], *, run_id: str, storage: str, study_name: str,
) -> dict[str, Any]:
    """summary.json of a target sweep on a filtered workload, from the study alone: ``choices``
    (one per unit: entry x build x strategy x bucket, in plan order), ``rows`` (every search
    step, per unit in the order measured), ``operating_points``, the cliffs and ``filters``."""
    from optuna.trial import TrialState

    assert spec.filters is not None
    done = book.done()
    by_unit: dict[str, list[Any]] = {}
    for t in book.trials((TrialState.COMPLETE,)):
        if tr.RESULT in t.user_attrs:
            by_unit.setdefault(t.user_attrs.get(tr.UNIT), []).append(t)
    probes: list[dict[str, Any]] = []
    choices: list[dict[str, Any]] = []
    for u in plan:
        for t in sorted(by_unit.get(u.key, []), key=lambda t: t.number):
            row = PointResult.from_dict(t.user_attrs[tr.RESULT]).extra.get("row")
            if row is not None:
                probes.append(row)
        res = done.get(u.key)
        if res is not None and "choice" in res.extra:
            choices.append(dict(res.extra["choice"]))
    best, by = cliffs([{**c, "recall": 0.0} for c in choices], spec.target_recall)
    return {
        "kind": SweepSummary.KIND, "workload": WORKLOAD_FILTERED, "run_id": run_id,
        "name": spec.name, "dataset": ds.name, "dataset_fingerprint": ds.fingerprint,
        "metric": ds.metric, "k": spec.k, "strategy": "target",
        "target_recall": spec.target_recall, "objective": spec.tune.objective,
        "confidence": spec.tune.confidence.model_dump(), "queries": split.describe(),
        "recall_definition": "filtered recall@k by id over the tuning queries (fewer-than-k "
                             "rule; tie-aware in recall_tie)",
        "latency_unit": "ms, single-query mode (each query with its filter); qps from batch",
        "cheapest_rule": "per bucket and strategy: the smallest knob value whose lower "
                         "confidence bound on filtered mean recall meets the target; operating "
                         "point: lowest p95 among those passing the held-out check",
        "evaluations": len(probes), "study": {"storage": storage, "name": study_name},
        "backends": {}, "builds": [], "pareto": [], "rows": probes, "choices": choices,
        "operating_points": operating_points(choices),
        "filters": filter_summary(spec.filters, buckets),
        "cliff_selectivity": best, "cliff_by_strategy": by, "cliff_rule": CLIFF_RULE,
    }
