"""``tune.build_search: derived`` through ``rwb sweep``: one full build per group, the smaller M
derived from it, the summary's cost fields, and the same answer as the full path on a case
built so that it must (only the largest M can reach the target inside the searched range);
the derived side's smaller ef_construction is dominated and not built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faiss")

from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


def _spec(mode: str) -> dict[str, Any]:
    return {
        "name": f"derived-{mode}", "dataset": "synthetic-small", "k": 10, "seed": 0,
        "threads": 1, "target_recall": 0.95,
        # the derived side also lists ef_construction 32: dominated by 64 (same M), not built
        "indexes": [{"backend": "faiss-hnsw",
                     "build": {"M": [2, 32],
                               "ef_construction": [32, 64] if mode == "derived" else 64},
                     "search": {"ef_search": [10]}}],
        # M=2 cannot reach recall 0.95 at ef_search <= 12 on this data; M=32 can
        "tune": {"build_search": mode, "search_range": {"ef_search": [10, 12]}},
        "index_build": {"cache": False, "threads": 1},
    }


def _run(tmp_path: Path, mode: str) -> dict[str, Any]:
    spec = parse_spec(_spec(mode), source=f"{mode}.yaml")
    return run_sweep(spec, tmp_path / mode).summary


def test_derived_path_same_answer_as_full(tmp_path: Path) -> None:
    full = _run(tmp_path, "full")
    derived = _run(tmp_path, "derived")
    assert full["builds_full"] == 2 and full["builds_derived"] == 0
    assert derived["builds_derived"] == 1
    by_m = {b["build"]["M"]: b for b in derived["builds"]}
    assert by_m[2]["derived_from"] == {"M": 32, "ef_construction": 64}
    assert by_m[32]["derived_from"] is None
    assert all(r["derived_from"] == {"M": 32, "ef_construction": 64}
               for r in derived["rows"] if r["build"]["M"] == 2)
    # the case is built so the answer is forced: M=2 meets the target on neither path
    assert all(b["chosen"] is None for s in (full, derived) for b in s["builds"]
               if b["build"]["M"] == 2)
    assert full["answer"] is not None and derived["answer"] is not None
    assert derived["answer"]["build"] == full["answer"]["build"] == {"M": 32,
                                                                     "ef_construction": 64}
    assert derived["answer"]["search"] == full["answer"]["search"]
    # ef_construction 32 was dominated by 64 at each M: listed, never built
    assert derived["builds_dominated"] == 2 and len(derived["builds"]) == 2
    assert {(p["build"]["M"], p["reason"], p["dominated_by"]["ef_construction"])
            for p in derived["pruned"]} == {(2, "dominated", 64), (32, "dominated", 64)}
    # build seconds are recorded for every build (the ratio is benchmarks/build_tuning.py's)
    assert derived["build_cost_s"] > 0 and full["build_cost_s"] > 0
