"""``tune.build_search: derived`` over an ``M x ef_construction`` grid: the units whose
``ef_construction`` is below the largest of their ``M`` are dominated and left out of the plan
(``pruned`` with ``reason: dominated``); ``dominated_builds: build`` (or ``build_search:
full``) keeps them all. The sweep itself: tests/tune/test_build_search_derived.py."""

from __future__ import annotations

from typing import Any

from retrieval.tune.derived import dominance_plan, undominated
from retrieval.tune.spec import parse_spec
from retrieval.tune.units import plan_units


def _spec(mode: str = "derived", dominated: str = "skip") -> dict[str, Any]:
    return {
        "name": f"dominated-{mode}-{dominated}", "dataset": "synthetic-small", "k": 10,
        "seed": 0, "threads": 1, "target_recall": 0.9, "modes": ["batch"], "warmup": 0,
        "batch_repeats": 1,
        "indexes": [
            {"backend": "faiss-hnsw", "build": {"M": [4, 8], "ef_construction": [16, 32, 48]},
             "search": {"ef_search": [10]}},
            {"backend": "faiss-flat"},
        ],
        "tune": {"strategy": "target", "objective": "qps", "build_search": mode,
                 "dominated_builds": dominated,
                 "heldout_fraction": 0.2, "search_range": {"ef_search": [10, 64]}},
        "index_build": {"cache": False, "threads": 1},
    }


def test_dominance_plan_keeps_the_largest_ef_construction_of_each_m() -> None:
    plan = plan_units(parse_spec(_spec(), source="d.yaml"), "target")
    dom = dominance_plan(plan)
    hnsw = [u for u in plan if u.backend == "faiss-hnsw"]
    assert len(hnsw) == 6 and len(dom) == 4
    for u in hnsw:
        if u.build["ef_construction"] == 48:
            assert u.key not in dom
        else:
            assert dom[u.key].build == {"M": u.build["M"], "ef_construction": 48}
    assert all(u.key not in dom for u in plan if u.backend == "faiss-flat")
    # what the sweep keeps: dominated units out on the derived path only
    kept, records = undominated(parse_spec(_spec(), source="d.yaml"), plan)
    assert len(kept) == len(plan) - 4 and {r["reason"] for r in records} == {"dominated"}
    for other in (_spec(dominated="build"), _spec(mode="full")):
        assert undominated(parse_spec(other, source="o.yaml"), plan) == (list(plan), [])
