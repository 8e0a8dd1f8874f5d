"""`rwb profile` against a real Redis (the semantic-cache stage and the cache remedy step) and
its open-loop pass (`load: {rates: ...}`: the load bench's schedule, corrected percentiles per
rate). Small: one collection of 30 SciFact abstracts, 8 logged queries (4 asked twice, so the
second asking hits the cache at distance 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.paths import data_dir
from retrieval.profiling.run import run_profile
from retrieval.profiling.spec import parse_profile_spec

pytestmark = [pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.redis,
    pytest.mark.skipif(not data_dir().is_dir(),
                       reason=f"shared data folder absent ({data_dir()}); set RWB_DATA_DIR"),
]

TEXTS = ["vitamin D deficiency and bone fractures in the elderly",
         "gene expression of tumour suppressors in breast cancer",
         "antibiotic resistance of hospital acquired infections",
         "sleep duration and cardiovascular mortality"]


def _queries(tmp_path: Path) -> Path:
    p = tmp_path / "queries.jsonl"
    rows = [{"id": f"q{i}", "text": t} for i, t in enumerate(TEXTS)] * 2
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _spec(**extra: object) -> dict[str, object]:
    return {"name": "cache-load", "k": 5, "warmup": 0,
            "retrieval": {"collections": [
                {"name": "scifact", "source": "scifact", "sample": 30, "backend": "hnswlib",
                 "build": {"M": 8, "ef_construction": 32}, "search": {"ef_search": 16}}]},
            **extra}


def test_cache_stage_and_open_loop(tmp_path: Path, redis_url: str) -> None:
    spec = parse_profile_spec(_spec(cache={"threshold": 0.05, "redis_url": redis_url},
                                    load={"rates": [20.0, 40.0], "duration_s": 0.5,
                                          "workers": 2, "arrival": "fixed"}))
    s = run_profile(spec, queries_file=_queries(tmp_path), workdir=tmp_path / "w").summary
    # the cache stage ran: the second asking of each query is a hit, the first a miss
    assert s["cache"] == {"lookups": 8, "hits": 4, "hit_rate": 0.5, "false_hit_rate": None}
    stages = {r["name"]: r for r in s["stages"]}
    assert stages["cache"]["n"] == 8 and stages["retrieve"]["n"] == 4
    # the open-loop pass: one row per rate, corrected and uncorrected percentiles
    assert [r["rate_qps"] for r in s["load"]] == [20.0, 40.0]
    for r in s["load"]:
        assert r["requests"] == int(r["rate_qps"] * 0.5)
        assert 0 < r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"]
        # measured from the intended send time: never below the uncorrected figure
        assert r["p99_ms"] >= r["p99_ms_uncorrected"]
        assert {x["name"] for x in r["stages"]} >= {"embed", "cache"}


def test_cache_remedy_opens_redis(tmp_path: Path, redis_url: str,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    spec = parse_profile_spec(_spec(remedies={"parallel": False, "cache_threshold": 0.05}))
    s = run_profile(spec, queries_file=_queries(tmp_path), remedies=True,
                    workdir=tmp_path / "w").summary
    assert s["cache"] is None  # no cache stage in the baseline
    steps = {r["step"]: r for r in s["remedies"]["steps"]}
    step = steps["cache at tuned threshold"]
    assert step["applied"] and "cosine distance 0.05" in step["what"]
    assert step["cache_hit_rate"] == 0.5
    assert "cache" in step["stages"]
    assert not steps["parallel collections"]["applied"]
