"""Threshold tuning on a 2,000-pair QQP subset against a real Redis: the cap holds on the tuning
split, counts match an exact offline search, the run directory, export and verify, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from retrieval.paths import data_dir
from retrieval.stats.binomial import wilson_upper

pytestmark = [pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.skipif(not (data_dir() / "gptcache_qqp").is_dir(),
                       reason=f"shared data folder {data_dir() / 'gptcache_qqp'} is absent"),
]

SMALL = {
    "name": "qqp-cache-small",
    "pairs": {"limit": 2000, "seed": 0},
    "cache": {"name": "rwb-test-tune"},
    "latency": {"sizes": [1000, 3000], "queries": 100, "warmup": 10},
    "tuning": {"max_false_hit": 0.05},
}


@pytest.fixture(scope="module")
def tuned(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from retrieval.cache.run import run_cache_tuning
    from retrieval.cache.spec import parse_cache_spec

    out = tmp_path_factory.mktemp("cache-run") / "run"
    outcome = run_cache_tuning(parse_cache_spec(SMALL), redis_url=redis_url, out=str(out))
    return {"summary": outcome.summary, "sweep": outcome.sweep, "out": out}


@pytest.mark.model
def test_cap_holds_on_tuning_split(tuned: dict[str, Any]) -> None:
    s = tuned["summary"]
    assert s["feasible"] and s["threshold_unit"] == "cosine_distance"
    assert 0.0 < s["threshold"] < 1.0
    tun = s["tuning"]
    assert s["false_hit_upper_bound"] <= 0.05
    assert tun["false_hit_rate"] <= s["false_hit_upper_bound"]
    assert s["false_hit_upper_bound"] == pytest.approx(
        float(wilson_upper(tun["false_hits"], tun["probes"], 0.95)))
    assert tun["probes"] + s["heldout"]["probes"] == s["design"]["n_probes"]
    assert 0.0 < s["heldout_hit_rate"] < 1.0 and s["heldout"]["precision"] > 0.5
    assert s["design"]["n_pairs"] == 2000 and s["design"]["n_stored"] > 3500
    assert s["knn_check"]["same_nearest"] >= 0.95
    live = s["live_lookup_agreement"]  # redisvl range lookups replayed at the chosen threshold
    assert live["sample"] == 300 and live["agreement"] >= 0.95 and live["lookup"] == "range"
    assert set(s["latency_ms"]) == {"1000", "3000"}
    assert s["latency_ms"]["1000"]["p50_ms"] <= s["latency_ms"]["1000"]["p99_ms"]
    eq = s["threshold_equivalents"]
    assert eq["gptcache.similarity_threshold"] == pytest.approx(1 - s["threshold"] / 2)
    cost = s["cost"]
    assert cost["usd_saved_per_1k_queries"] == pytest.approx(
        1000 * s["heldout_hit_rate"] * cost["usd_per_llm_call"])


@pytest.mark.model
def test_counts_match_an_exact_offline_search(tuned: dict[str, Any]) -> None:
    """Redis KNN (HNSW) vs exact numpy nearest neighbours, self excluded, at the chosen t."""
    from retrieval.cache.run import embed_questions
    from retrieval.cache.spec import parse_cache_spec
    from retrieval.cache.tune import design_probes, qqp_labels

    spec = parse_cache_spec(SMALL)
    labels = qqp_labels()
    design = design_probes(labels, spec)
    vecs = embed_questions(labels, design.stored, spec)
    sims = vecs[design.probes] @ vecs[design.stored].T
    sims[design.probes[:, None] == design.stored[None, :]] = -np.inf
    best = np.argmax(sims, axis=1)
    nn = design.stored[best]
    nd = 1.0 - sims[np.arange(len(best)), best]
    correct = design.is_duplicate(design.probes, nn)
    t = tuned["summary"]["threshold"]
    tun = ~design.heldout
    hits = int((nd[tun] <= t).sum())
    false = int(((nd[tun] <= t) & ~correct[tun]).sum())
    got = tuned["summary"]["tuning"]
    assert abs(got["hits"] - hits) <= 0.01 * got["probes"]
    assert abs(got["false_hits"] - false) <= 0.01 * got["probes"]


def test_correct_hits_are_labelled_duplicates(tuned: dict[str, Any]) -> None:
    from retrieval.cache.tune import qqp_labels
    from retrieval.loaders.shared import load_qqp_pairs

    labels = qqp_labels()
    dup = {frozenset((p.text_a, p.text_b)) for p in load_qqp_pairs("full") if p.label == 1}
    probes = pd.read_parquet(tuned["out"] / "probes.parquet")
    t = tuned["summary"]["threshold"]
    hit = probes[probes.nn_distance <= t]
    assert len(hit) > 50
    for row in hit.itertuples():
        pair = frozenset((labels.questions[row.qid], labels.questions[row.nn_qid]))
        assert (pair in dup) == row.correct
        assert row.qid != row.nn_qid  # a probe never matches its own entry


def test_run_directory(tuned: dict[str, Any]) -> None:
    out: Path = tuned["out"]
    for name in ("spec.yaml", "manifest.json", "summary.json", "curve.parquet", "probes.parquet"):
        assert (out / name).is_file(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "cache-tune"
    assert manifest["dataset"]["fingerprint"].startswith("sha256:")
    assert manifest["redis"]["redis_version"].startswith("8.")
    curve = pd.read_parquet(out / "curve.parquet")
    assert set(curve.split) == {"tuning", "heldout"}
    assert len(curve) == 2 * 10001  # grid 0..1 step 1e-4, both splits
    tuning = curve[curve.split == "tuning"].sort_values("threshold")
    assert tuning.hit_rate.is_monotonic_increasing
    assert tuning.false_hit_upper_bound.is_monotonic_increasing
    assert "redis://" not in (out / "spec.yaml").read_text()


@pytest.mark.model
def test_export_and_verify(tuned: dict[str, Any], redis_url: str, tmp_path: Path) -> None:
    from redisvl.extensions.cache.llm import SemanticCache as RvlCache

    from retrieval.exporting import export_run, verify_file
    from retrieval.exporting.redisvl import semantic_cache_kwargs

    cfg = tmp_path / "cache.redisvl.yaml"
    exported = export_run(tuned["out"], "redisvl", cfg)
    assert exported.distance_threshold == tuned["summary"]["threshold"]
    text = cfg.read_text()
    assert "redis://" not in text and "password" not in text
    doc = yaml.safe_load(text)
    assert doc["semantic_cache"]["distance_threshold"] == tuned["summary"]["threshold"]
    assert doc["distance_threshold_unit"].startswith("cosine_distance")
    ev = doc["evidence"]
    assert ev["target"]["max_false_hit"] == 0.05
    assert ev["tuning"]["false_hit_upper_bound"] <= 0.05
    assert ev["dataset"]["fingerprint"] == tuned["summary"]["design"]["fingerprint"]
    lat = ev["latency_ms"]["1000"]  # the run's own measurement, ordered percentiles
    assert 0 < lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"]
    for key in ("p50_ms", "p95_ms", "p99_ms"):
        assert lat[key] == pytest.approx(tuned["summary"]["latency_ms"]["1000"][key], rel=1e-5)
    assert ev["versions"]["redisvl"] and ev["run_id"] == "run"
    assert ev["live_lookup_agreement"]["sample"] == 300
    # redisvl itself accepts the exported arguments
    from retrieval.cache.redis import embedder_vectorizer as _vectorizer

    kwargs = semantic_cache_kwargs(cfg)
    rvl = RvlCache(**kwargs, vectorizer=_vectorizer(None, 384, "x"), redis_url=redis_url,
                   overwrite=True)
    assert rvl.distance_threshold == tuned["summary"]["threshold"]
    rvl.delete()
    report = verify_file(cfg)  # REDIS_URL or a private server, like `rwb verify`
    assert report.holds, report.checks
    m = report.measured
    assert m["hit_rate"] == pytest.approx(tuned["summary"]["heldout_hit_rate"], abs=0.02)
    assert m["live_lookup_agreement"]["agreement"] >= 0.97
    assert m["live_lookup_agreement"]["sample"] == 300


@pytest.mark.model
def test_cli_tune_cache_json_and_bad_input(
    tuned: dict[str, Any], redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval.cli import main
    from retrieval.engines.redis.server import free_port

    spec = tmp_path / "small.yaml"
    spec.write_text(yaml.safe_dump({**SMALL, "latency": {"sizes": [1000], "queries": 50,
                                                           "warmup": 5}}))
    rc = main(["tune", "cache", str(spec), "--max-false-hit", "0.05", "--json",
               "--redis-url", redis_url, "--out", str(tmp_path / "run")])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["threshold"] == tuned["summary"]["threshold"]  # deterministic given the data
    assert out["threshold_unit"] == "cosine_distance"
    assert out["false_hit_upper_bound"] <= 0.05 and "heldout_hit_rate" in out
    assert {"threshold", "split", "hit_rate", "false_hit_rate", "precision"} <= set(
        out["curve"][0])
    assert main(["tune", "cache", str(spec), "--max-false-hit", "1.5"]) == 2
    assert "field 'tuning.max_false_hit' must be < 1.0; received 1.5" in capsys.readouterr().err
    port = free_port()
    assert main(["tune", "cache", str(spec), "--redis-url",
                 f"redis://u:hunter2@127.0.0.1:{port}"]) == 3  # not reachable
    err = capsys.readouterr().err
    assert f"cannot reach Redis at redis://***@127.0.0.1:{port}" in err
    assert "hunter2" not in err


@pytest.mark.slow
@pytest.mark.model
def test_real_tuning_on_a_bigger_sample(redis_url: str, tmp_path: Path) -> None:
    """5,000 pairs (~9.9k questions stored, ~5k probes): the cap holds on tuning with
    thousands of probes and transfers to the held-out split."""
    from retrieval.cache.run import run_cache_tuning
    from retrieval.cache.spec import parse_cache_spec

    # 5,000 pairs rather than 10,000: embedding the stored questions is most of this test's time
    # (its seeded pairs are embedded by no other test), and 2,500 probes per split are still
    # 2.5x the 2,000-pair tests' and enough for the Wilson bound to sit near the rate
    spec = parse_cache_spec({
        "name": "qqp-cache-5k", "pairs": {"limit": 5_000, "seed": 1},
        "cache": {"name": "rwb-test-tune-5k"},
        "latency": {"sizes": [5_000], "queries": 300, "warmup": 30},
    })
    s = run_cache_tuning(spec, redis_url=redis_url, out=str(tmp_path / "run")).summary
    assert s["feasible"]
    assert s["false_hit_upper_bound"] <= 0.05
    assert s["tuning"]["probes"] > 2000 and s["heldout"]["probes"] > 2000
    # the bound is on the tuning split; on held-out the rate stays near the cap
    assert s["heldout_false_hit_rate"] <= 0.05 + 0.01
    assert s["heldout_hit_rate"] > 0.08 and s["heldout"]["precision"] > 0.5
    assert s["knn_check"]["same_nearest"] >= 0.95
    assert s["latency_ms"]["5000"]["p50_ms"] > 0
