"""Re-ranking after the real-build check of a derived answer (``tune.build_search: derived``):
a checked build competes with its REAL point, another derived build that is now cheapest is
checked in turn (at most ``MAX_CHECKS``), and after that only real builds compete.

The engine and measurer here are stand-ins with a known recall per (build, ef) so the checks'
outcomes are forced; the real path (Faiss, a real derived graph and its check) is
tests/tune/test_build_search_derived.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval.tune.derived import MAX_CHECKS, answer_of, build_cost, check_answer, checks_of
from retrieval.tune.results import PointResult
from retrieval.tune.spec import parse_spec
from retrieval.tune.units import Unit, plan_units

TARGET = 0.95


def _spec() -> Any:
    return parse_spec({
        "name": "rerank", "dataset": "synthetic-small", "k": 10, "seed": 0,
        "target_recall": TARGET,
        "indexes": [{"backend": "faiss-hnsw", "build": {"M": [4, 8, 16, 32],
                                                         "ef_construction": 64},
                     "search": {"ef_search": [10]}}],
        "tune": {"build_search": "derived", "search_range": {"ef_search": [10, 400]}},
    }, source="rerank.yaml")


def _point(ef: int, recall: float, p95: float) -> PointResult:
    return PointResult(search={"ef_search": ef}, recall=recall,
                       recall_lb=recall - 0.01, recall_tie=recall, recall_p5=recall,
                       n_queries=100, p50_ms=p95 / 2, p95_ms=p95, p99_ms=p95 * 1.2,
                       qps=1000.0 / p95, build_s=1.0, memory_bytes=None,
                       meets=recall - 0.01 >= TARGET)


def _builds(plan: list[Unit], chosen: dict[int, tuple[int, float, float]]) -> list[dict[str, Any]]:
    """Build docs as the summary has them: M 32 built in full, the others derived from it;
    ``chosen``: M -> (ef, derived recall, p95 ms) of its cheapest point meeting the target."""
    out = []
    for u in plan:
        m = int(u.build["M"])
        c = chosen.get(m)
        out.append({"unit": u.key, "label": u.label, "backend": u.backend,
                    "build": dict(u.build),
                    "derived_from": None if m == 32 else {"M": 32, "ef_construction": 64},
                    "chosen": None if c is None else _point(*c).to_dict()})
    return out


@dataclass
class Engine:
    """Stand-in evaluator + measurer: a real build of M reaches ``real[M](ef)`` recall, its
    single-query p95 is ``ef * ms_per_ef[M]`` ms. Records what was built."""

    real: dict[int, Any]
    ms_per_ef: dict[int, float]
    built: list[int] = field(default_factory=list)

    def build(self, backend: str, params: Any) -> dict[str, int]:
        m = int(dict(params)["M"])
        self.built.append(m)
        return {"M": m}

    def release(self, built: Any) -> None:
        pass

    def _at(self, built: dict[str, int], config: Any) -> PointResult:
        m, ef = built["M"], int(dict(config.search)["ef_search"])
        return _point(ef, float(self.real[m](ef)), ef * self.ms_per_ef[m])

    def probe(self, built: dict[str, int], config: Any, *, every_query: bool = False
              ) -> PointResult:
        return self._at(built, config)

    def full(self, built: dict[str, int], config: Any) -> PointResult:
        return self._at(built, config)


def test_a_checked_answer_that_got_dearer_hands_the_answer_to_a_real_build() -> None:
    spec = _spec()
    plan = plan_units(spec, "target")
    # derived M 8 looks cheapest (ef 20 at 0.2 ms); for real it needs ef 39 (0.39 ms), dearer
    # than M 32 (built in full: ef 15, 0.3 ms); M 16 (derived, 0.35 ms) is checked next and
    # holds for real at its knob
    builds = _builds(plan, {8: (20, 0.97, 0.20), 16: (25, 0.97, 0.35), 32: (15, 0.97, 0.30)})
    eng = Engine(real={8: lambda ef: 0.90 if ef < 39 else 0.97, 16: lambda ef: 0.97,
                       32: lambda ef: 0.97},
                 ms_per_ef={8: 0.01, 16: 0.014, 32: 0.02})
    rec = check_answer(spec, eng, eng, None, plan, builds)
    assert rec is not None
    checks = checks_of(rec)
    assert eng.built == [8]  # M 16 (0.35 ms) is dearer than M 32's real 0.30 ms: not checked
    assert [c["build"]["M"] for c in checks] == [8]
    first = checks[0]
    assert first["shortcut_error"] > 0 and first["real_meets"] is False
    assert first["search_after_check"] == {"ef_search": 39} and first["meets_after_check"]
    assert first["point_after_check"]["p95_ms"] == 39 * 0.01
    ans = answer_of(builds, "p95_ms", None, checks, real_only=True)
    assert ans is not None
    assert ans["build"]["M"] == 32 and ans["check"] is None and ans["search"] == {"ef_search": 15}
    # before re-ranking the answer was the derived M 8's optimistic point
    assert answer_of(builds, "p95_ms", None)["build"]["M"] == 8  # type: ignore[index]
    cost = build_cost(builds, [], checks)
    assert cost["builds_full"] == 1 + 1 and cost["builds_derived"] == 3


def test_the_next_derived_build_is_checked_and_the_budget_ends_with_a_real_build() -> None:
    spec = _spec()
    plan = plan_units(spec, "target")
    # every derived graph is optimistic: each real build misses at any ef (never meets), so each
    # is dropped and the next cheapest derived build is checked, up to MAX_CHECKS
    builds = _builds(plan, {4: (12, 0.97, 0.10), 8: (14, 0.97, 0.15), 16: (18, 0.97, 0.20),
                            32: (30, 0.97, 0.60)})
    eng = Engine(real={m: (lambda ef: 0.5) for m in (4, 8, 16)} | {32: lambda ef: 0.97},
                 ms_per_ef={4: 0.01, 8: 0.01, 16: 0.01, 32: 0.02})
    checks = checks_of(check_answer(spec, eng, eng, None, plan, builds))
    assert MAX_CHECKS == 3 and [c["build"]["M"] for c in checks] == [4, 8, 16]
    assert eng.built == [4, 8, 16]
    assert all(not c["meets_after_check"] and c["point_after_check"] is None for c in checks)
    ans = answer_of(builds, "p95_ms", None, checks, real_only=True)
    assert ans is not None and ans["build"]["M"] == 32 and ans["derived_from"] is None


def test_a_checked_build_that_holds_stays_the_answer() -> None:
    spec = _spec()
    plan = plan_units(spec, "target")
    builds = _builds(plan, {8: (20, 0.97, 0.20), 32: (15, 0.97, 0.30)})
    eng = Engine(real={8: lambda ef: 0.97, 32: lambda ef: 0.97},
                 ms_per_ef={8: 0.01, 32: 0.02})
    checks = checks_of(check_answer(spec, eng, eng, None, plan, builds))
    ans = answer_of(builds, "p95_ms", None, checks, real_only=True)
    assert ans is not None and ans["build"]["M"] == 8
    assert ans["check"] is not None and ans["check"]["shortcut_error"] == 0.0
    assert ans["p95_ms"] == 20 * 0.01  # the real build's timed point, not the derived one's


def test_nothing_is_checked_when_the_answer_was_built_in_full() -> None:
    spec = _spec()
    plan = plan_units(spec, "target")
    builds = _builds(plan, {8: (20, 0.97, 0.50), 32: (15, 0.97, 0.30)})
    eng = Engine(real={8: lambda ef: 0.97, 32: lambda ef: 0.97}, ms_per_ef={8: 0.01, 32: 0.02})
    assert check_answer(spec, eng, eng, None, plan, builds) is None and eng.built == []


def test_a_record_from_before_re_ranking_reads_as_one_check() -> None:
    old = {"build": {"M": 8}, "search_after_check": {"ef_search": 40}, "real_build_s": 2.0}
    assert checks_of(old) == [old] and checks_of(None) == []
    assert checks_of({"checks": [old], "max_checks": 3}) == [old]
