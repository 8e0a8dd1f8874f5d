"""``tune.build_screen``: build candidates screened on a nested sample before the sweep; the
ones whose ceiling misses the target or whose cost is beaten are dropped, listed in
``pruned`` with the reason and the sample size, and the answer is unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("faiss")

from retrieval.data import VectorDataset
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


def _blobs(n: int = 8000, nq: int = 200, d: int = 32) -> VectorDataset:
    rng = np.random.default_rng(1)
    c = rng.normal(size=(100, d)).astype(np.float32) * 3
    base = c[rng.integers(0, 100, n)] + rng.normal(size=(n, d)).astype(np.float32)
    q = c[rng.integers(0, 100, nq)] + rng.normal(size=(nq, d)).astype(np.float32)
    return VectorDataset.from_arrays(base, q, "l2", name="blobs-screen")


def _spec(screen: bool) -> dict[str, Any]:
    return {
        "name": f"screen-{screen}", "dataset": "given", "k": 10, "seed": 0, "threads": 1,
        "target_recall": 0.95, "modes": ["batch"], "warmup": 0, "batch_repeats": 1,
        "indexes": [
            # M 2 / ef_construction 10: its ceiling (ef_search 40) misses 0.95 on blobs
            {"backend": "faiss-hnsw", "build": {"M": [2, 16], "ef_construction": [10, 40]},
             "search": {"ef_search": [10]}},
        ],
        "tune": {"objective": "qps", "heldout_fraction": 0.2,
                 "search_range": {"ef_search": [10, 40]},
                 # screened: the sample builds two at a time (one build thread each)
                 **({"build_screen": {"fraction": 0.25, "cost_margin": 1.0},
                     "concurrent_builds": "auto"} if screen else {})},
        "index_build": {"cache": False, "threads": 1 if not screen else 2},
    }


def test_screen_drops_the_low_ceiling_build_and_keeps_the_answer(tmp_path: Path) -> None:
    ds = _blobs()
    full = run_sweep(parse_spec(_spec(False), source="a.yaml"), tmp_path / "a", dataset=ds)
    scr = run_sweep(parse_spec(_spec(True), source="b.yaml"), tmp_path / "b", dataset=ds)
    s, f = scr.summary, full.summary
    assert "pruned" not in f
    assert s["build_screen"]["at_n"] == 2000 and s["build_screen"]["screened"] == 4
    reasons = {(p["build"]["M"], p["build"]["ef_construction"]): p for p in s["pruned"]}
    assert reasons, "something must be dropped on this case"
    low = reasons.get((2, 10))
    assert low is not None and low["reason"] == "ceiling" and low["ceiling"] < 0.95
    assert all(p["at_n"] == 2000 for p in s["pruned"])
    # the dropped builds were never built at the full N; the rest were
    kept = {(b["build"]["M"], b["build"]["ef_construction"]) for b in s["builds"]}
    assert kept.isdisjoint(reasons) and len(kept) == 4 - len(reasons)
    # the answer of the screened sweep is the full sweep's
    assert s["answer"]["build"] == f["answer"]["build"]
    assert s["answer"]["search"] == f["answer"]["search"]
    assert s["build_screen"]["screen_build_s"] > 0
