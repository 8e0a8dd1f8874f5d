"""``tune.build_search: derived``: which builds of a sweep are derived from which.

Dominated builds first (``tune.dominated_builds: skip``, the default): a build param whose
larger value is taken never to search worse (:class:`~retrieval.indexes.base.
SupportsDominantBuild`, HNSW's ``ef_construction``) is not searched below the largest of its
group: of the units differing only in that param, every one but the largest is dropped before
the sweep (``pruned`` with ``reason: dominated`` and ``dominated_by``). A smaller
``ef_construction`` cannot be derived by pruning (it is a narrower candidate search, not a
subset of the larger graph), and at the same ``M`` its graph is no better at search time, so
it can only tie the larger one's search cost; the answer's build is then checked for real as
every derived answer is. This is what brings the build seconds of an ``M x ef_construction``
grid down to ONE full build (+ the check) instead of one per ``ef_construction``.

Then, within one index entry, the units of a backend that can derive a build
(:class:`~retrieval.indexes.base.SupportsDerivedBuild`, e.g. Faiss HNSW over ``M``) are grouped
by every build param except the derived one; in each group the unit with the LARGEST value is
built in full (the source) and every other is derived from it. Units of a backend that cannot
derive, or alone in their group, are built in full. The rule reads only the plan, so every
worker and the summary agree on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrieval.indexes.base import SupportsDerivedBuild, SupportsDominantBuild
from retrieval.indexes.registry import get_backend
from retrieval.tune.units import Unit, canon


def derive_param_of(backend: str) -> str | None:
    """The build param ``backend`` derives smaller values of (None: it cannot derive)."""
    cls = get_backend(backend)
    if isinstance(cls, type) and issubclass(cls, SupportsDerivedBuild):
        return str(cls.derived_param())
    return None


def dominant_param_of(backend: str) -> str | None:
    """The build param of ``backend`` whose larger value dominates (None: none)."""
    cls = get_backend(backend)
    if isinstance(cls, type) and issubclass(cls, SupportsDominantBuild):
        return str(cls.dominant_param())
    return None


def dominance_plan(units: Sequence[Unit]) -> dict[str, Unit]:
    """unit key -> the unit that dominates it: same entry, backend, fixed search params and
    build except a LARGER value of the backend's dominant param (the largest of the group)."""
    return _to_largest(units, dominant_param_of)


def _to_largest(units: Sequence[Unit], param_of: Callable[[str], str | None]
                ) -> dict[str, Unit]:
    """unit key -> the unit of its group (same everything but ``param_of(backend)``) with the
    largest value of that param, for every unit whose value is smaller."""
    groups: dict[str, list[Unit]] = {}
    params: dict[str, str] = {}
    for u in units:
        param = param_of(u.backend)
        if param is None or not isinstance(u.build.get(param), int):
            continue
        g = _group(u, param)
        groups.setdefault(g, []).append(u)
        params[g] = param
    out: dict[str, Unit] = {}
    for g, members in groups.items():
        param = params[g]
        top = max(members, key=lambda m: int(m.build[param]))
        for m in members:
            if int(m.build[param]) < int(top.build[param]):
                out[m.key] = top
    return out


def undominated(spec: Any, plan: Sequence[Unit]) -> tuple[list[Unit], list[dict[str, Any]]]:
    """``tune.build_search: derived`` with ``tune.dominated_builds: skip``: the plan without
    its dominated units, and their ``pruned`` records (``reason: dominated``,
    ``dominated_by``: the build params of the unit kept in their place). Grid-strategy plans
    and any other setting: the plan unchanged."""
    tune = spec.tune
    if (tune.build_search != "derived" or tune.dominated_builds != "skip"
            or tune.strategy != "target"):
        return list(plan), []
    dom = dominance_plan(plan)
    records = [{"unit": u.key, "label": u.label, "backend": u.backend, "build": dict(u.build),
                "reason": "dominated", "dominated_by": dict(dom[u.key].build)}
               for u in plan if u.key in dom]
    return [u for u in plan if u.key not in dom], records


def _group(u: Unit, param: str) -> str:
    rest = {k: v for k, v in u.build.items() if k != param}
    return canon({"entry": u.entry, "backend": u.backend, "build": rest, "fixed": u.fixed,
                  "strategy": u.strategy, "bucket": u.bucket})


def derivation_plan(units: Sequence[Unit]) -> dict[str, Unit]:
    """unit key -> the unit whose build it is derived from (only derived units are keys)."""
    return _to_largest(units, derive_param_of)


def derived_from(unit: Unit, source: Unit) -> dict[str, Any]:
    """The ``derived_from`` record of a derived unit: the source's build params."""
    return dict(source.build)


__all__ = ["derivation_plan", "derive_param_of", "derived_from", "dominance_plan",
           "dominant_param_of", "undominated"]


#: the study attribute holding the real-build check of a derived answer
CHECK_ATTR = "rwb:shortcut_check"
#: the study attribute holding tune.build_screen's record (:mod:`retrieval.tune.screen`)
SCREEN_ATTR = "rwb:build_screen"
#: the study attribute holding the dominated units' ``pruned`` records (:func:`undominated`)
DOMINATED_ATTR = "rwb:dominated"


#: at most this many derived answers are built for real and checked (each a full build): after
#: that, the answer is the cheapest build that is real (built in full, or checked)
MAX_CHECKS = 3


def checks_of(record: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The real-build checks a study recorded under :data:`CHECK_ATTR`, in the order they ran
    (a record of a run before re-ranking holds one check, itself)."""
    if not record:
        return []
    if "checks" in record:
        return [dict(c) for c in record["checks"]]
    return [dict(record)]


def answer_of(builds: Sequence[dict[str, Any]], objective: str,
              slo_p95_ms: float | None, checks: Sequence[Mapping[str, Any]] = (),
              *, real_only: bool = False) -> dict[str, Any] | None:
    """The cheapest (build, search) over the whole grid that meets the target: of the builds'
    ``chosen`` points (each its build's cheapest meeting the target), the best by the sweep's
    objective (:func:`retrieval.tune.decide.rank_key`) within the SLO; None when none meets.

    A build in ``checks`` (built for real because its derived graph was the answer) competes
    with its REAL measurement: its timed point at the knob that met on the real build
    (``point_after_check``), or not at all when the real build never met. ``real_only``: derived
    builds that were not checked do not compete (the answer once the check budget is spent).
    The answer carries ``check`` (its own check, None when its build was built in full)."""
    from retrieval.tune.decide import rank_key, within_slo
    from retrieval.tune.results import PointResult

    checked = {str(c["unit"]): c for c in checks if c.get("unit") is not None}
    ok: list[tuple[dict[str, Any], dict[str, Any], Mapping[str, Any] | None]] = []
    for b in builds:
        c = checked.get(str(b["unit"]))
        if c is not None:
            point = c.get("point_after_check") if c.get("meets_after_check") else None
        elif real_only and b.get("derived_from") is not None:
            point = None
        else:
            point = b.get("chosen")
        if point is not None and within_slo(PointResult.from_dict(point), slo_p95_ms):
            ok.append((b, point, c))
    if not ok:
        return None
    best, chosen, check = min(ok, key=lambda t: rank_key(PointResult.from_dict(t[1]),
                                                         objective))  # type: ignore[arg-type]
    return {"label": best["label"], "backend": best["backend"], "unit": best["unit"],
            "build": best["build"], "search": chosen["search"],
            **{k: chosen.get(k) for k in ("recall", "recall_lb", "p95_ms", "qps")},
            "derived_from": best.get("derived_from"),
            "check": None if check is None else dict(check)}


def check_answer(spec: Any, ev: Any, measurer: Any, book: Any, plan: Sequence[Unit],
                 builds: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Check the answer for real when its build was derived, and RE-RANK: the answer's build is
    built for real and measured at the answer's search params; when its lower bound misses the
    target there the knob rises (x1.25 steps, at most 8 probes) until it meets, and the real
    build's timed point at that knob replaces the derived one. When another build is now the
    cheapest and it was derived too, it is checked the same way; at most :data:`MAX_CHECKS`
    checks, after which only real builds compete. Returns ``{"checks": [...], "max_checks"}``
    (each check: ``shortcut_error`` = derived recall minus real recall at the derived answer's
    knob, in recall points 0..1) or None (the answer was built in full: nothing checked)."""
    objective, slo = spec.tune.objective, spec.tune.slo_p95_ms
    checks: list[dict[str, Any]] = []
    while len(checks) < MAX_CHECKS:
        ans = answer_of(builds, objective, slo, checks)
        if ans is None or ans.get("derived_from") is None or ans.get("check") is not None:
            break
        checks.append(_check_one(spec, ev, measurer, plan, ans))
    if not checks:
        return None
    return {"checks": checks, "max_checks": MAX_CHECKS}


def _check_one(spec: Any, ev: Any, measurer: Any, plan: Sequence[Unit],
               ans: Mapping[str, Any]) -> dict[str, Any]:
    """One derived answer built for real, measured, its knob raised until it meets, and the
    met knob measured in full (timed) so it ranks against the other builds' chosen points."""
    import time

    from retrieval.tune.spec import checked_entries

    unit = next(u for u in plan if u.key == ans["unit"])
    entry = checked_entries(spec)[unit.entry]
    t0, c0 = time.perf_counter(), time.process_time()
    real = ev.build(unit.backend, entry.build(unit.build))
    build_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    try:
        search = dict(ans["search"])
        first = measurer.probe(real, entry.config(unit.build, search), every_query=True)
        point, probes = first, 1
        while unit.knob is not None and point.meets is False and probes < 8:
            value = int(search[unit.knob])
            nxt = min(unit.high, max(value + 1, round(value * 1.25)))
            if nxt == value:
                break
            search[unit.knob] = nxt
            point = measurer.probe(real, entry.config(unit.build, search), every_query=True)
            probes += 1
        timed = (measurer.full(real, entry.config(unit.build, search)).to_dict()
                 if point.meets else None)
    finally:
        ev.release(real)
    return {
        "unit": unit.key, "label": ans["label"],
        "build": dict(unit.build), "derived_from": ans["derived_from"],
        "search": dict(ans["search"]), "recall_derived": ans["recall"],
        "recall_real": first.recall, "recall_lb_real": first.recall_lb,
        "shortcut_error": None if ans["recall"] is None else ans["recall"] - first.recall,
        "real_meets": first.meets, "real_build_s": build_s, "real_build_cpu_s": cpu_s,
        "probes": probes,
        "search_after_check": dict(search), "meets_after_check": point.meets,
        "recall_lb_after_check": point.recall_lb, "point_after_check": timed,
    }


def build_cost(builds: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]],
               checks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``build_cost_s`` (seconds spent building: full builds + derivations + the real builds
    of the checks), ``builds_full`` (the checks' real builds included), ``builds_derived``."""
    per_unit: dict[str, float] = {}
    for r in rows:
        if r.get("build_s") is not None:
            per_unit.setdefault(r["unit"], float(r["build_s"]))
    for b in builds:
        if b.get("chosen") and b["chosen"].get("build_s") is not None:
            per_unit.setdefault(b["unit"], float(b["chosen"]["build_s"]))
    derived = sum(1 for b in builds if b.get("derived_from") is not None)
    cost = sum(per_unit.values()) + sum(float(c.get("real_build_s") or 0.0) for c in checks)
    return {"build_cost_s": cost, "builds_full": len(builds) - derived + len(checks),
            "builds_derived": derived}
