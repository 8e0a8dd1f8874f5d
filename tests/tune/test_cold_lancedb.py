"""A cold run on LanceDB IVF_PQ (embedded, extra 'lancedb'): a fresh copy of the table opened by
a fresh connection, its files' pages dropped; the summary has cold_p99_ms, warm_p99_ms and
queries_to_warm, and the target search's knob meets the target."""

from __future__ import annotations

import pytest

from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

pytest.importorskip("lancedb", reason="lancedb not installed (extra 'lancedb')")


def test_lancedb_ivfpq_cold_run(tmp_path):
    spec = parse_spec({
        "name": "cold-lance", "dataset": "synthetic-small", "k": 10, "seed": 0, "threads": 1,
        "warmup": 0, "target_recall": 0.85, "cold": True,
        "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "lancedb-ivfpq", "build": {"num_partitions": 8,
                                                           "num_sub_vectors": 8},
                     "search": {"nprobes": 1, "refine_factor": 10}}],
        "tune": {"strategy": "target", "search_range": {"nprobes": [1, 8]}},
    }, source="cold-lance.yaml")
    s = run_sweep(spec, tmp_path / "run").summary
    (row,) = s["cold"]
    assert row["backend"] == "lancedb-ivfpq" and row["drop_method"].startswith("posix_fadvise")
    assert row["cold_p99_ms"] > 0 and row["warm_p99_ms"] > 0
    assert row["queries_to_warm"] is None or 0 <= row["queries_to_warm"] <= 300
    assert row["resident_after_drop"] is None or row["resident_after_drop"] < 0.5
    assert row["recall_lower"] >= 0.85 - 1e-9 and 1 <= row["search"]["nprobes"] <= 8
