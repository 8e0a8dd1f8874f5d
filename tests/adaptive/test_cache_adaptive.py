"""``rwb tune cache`` with ``adaptive: {policies: [per_entry_threshold]}`` on a 2,000-pair QQP
subset against a real Redis: the per-entry thresholds keep the global rule's false-hit bound,
the fixed side is the run's own global threshold, and the CLI says which wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from retrieval.paths import data_dir

pytestmark = [pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.model,
    pytest.mark.skipif(not (data_dir() / "gptcache_qqp").is_dir(),
                       reason=f"shared data folder {data_dir() / 'gptcache_qqp'} is absent"),
]

# the same 2,000 pairs as test_cache_tune.py: their embeddings are shared (about 14 s with them)
SPEC = {
    "name": "qqp-cache-adaptive",
    "pairs": {"limit": 2000, "seed": 0},
    "cache": {"name": "rwb-test-adaptive"},
    "latency": {"sizes": [1000], "queries": 20, "warmup": 2},
    "tuning": {"max_false_hit": 0.05},
    "adaptive": {"policies": ["per_entry_threshold"], "bins": 3},
}


def test_per_entry_thresholds_in_the_cache_summary(redis_url: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from retrieval.cli import main

    spec = tmp_path / "cache.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    assert main(["tune", "cache", str(spec), "--out", str(tmp_path / "run"),
                 "--redis-url", redis_url]) == 0
    out = capsys.readouterr().out
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    (e,) = s["adaptive"]
    assert e["policy"] == "per_entry_threshold" and e["cost_unit"].startswith("misses")
    assert set(e) >= {"cost_unit", "mean", "p5", "vs_fixed"}
    d, vs = e["detail"], e["vs_fixed"]
    assert d["tuning"]["false_hit_upper_bound"] <= 0.05  # the same bound as the global rule
    assert vs["value"] == s["threshold"]
    assert d["fixed_heldout"]["hit_rate"] == pytest.approx(s["heldout_hit_rate"])
    assert d["fixed_tuning"]["hits"] <= d["tuning"]["hits"]
    assert len(d["thresholds"]) == len(d["edges"]) + 1 <= 3
    assert vs["verdict"] in out
