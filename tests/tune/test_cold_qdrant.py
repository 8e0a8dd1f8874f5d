"""A cold run on Qdrant's engine with on-disk vectors and graph (qdrant-edge): the built shard
saved, a fresh copy loaded by EdgeShard.load, its files' pages dropped; the summary keys, and the
reloaded shard answers like the built one (recall at the chosen knob meets the target)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.data import VectorDataset
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

pytest.importorskip("qdrant_edge", reason="qdrant-edge-py not installed (extra 'qdrant')")


def test_qdrant_on_disk_cold_run(tmp_path):
    rng = np.random.default_rng(0)
    ds = VectorDataset.from_arrays(rng.normal(size=(3000, 32)).astype(np.float32),
                                   rng.normal(size=(100, 32)).astype(np.float32), "l2",
                                   name="cold-qdrant")
    spec = parse_spec({
        "name": "cold-qdrant", "dataset": "synthetic-small", "k": 10, "warmup": 0,
        "target_recall": 0.9, "cold": True, "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "qdrant", "build": {"m": 8, "ef_construct": 40, "on_disk": True},
                     "search": {"hnsw_ef": 10}}],
    }, source="cold-qdrant.yaml")
    s = run_sweep(spec, tmp_path / "run", dataset=ds).summary
    (row,) = s["cold"]
    assert row["backend"] == "qdrant" and row["drop_method"].startswith("posix_fadvise")
    assert {"cold_p99_ms", "warm_p99_ms", "queries_to_warm"} <= set(row)
    assert row["recall_lower"] >= 0.9 - 1e-9  # the reloaded shard is the built one
