"""The cross-layer study on the user's own data: `rwb sweep` on a rag-study spec whose retrieval
collection is a BEIR folder (a real Cranfield cut) and whose cache traffic is a labelled pairs
file (real QQP pairs), tiny budget. The records name both."""

from __future__ import annotations

import json

import pytest
import yaml

from retrieval.cli import main
from retrieval.paths import data_dir

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.model
def test_study_on_a_beir_folder_and_a_pairs_file(tmp_path, capsys, monkeypatch, redis_url):
    for name in ("cranfield", "gptcache_qqp"):
        if not (data_dir() / name).is_dir():
            pytest.skip(f"shared data '{name}' not found under {data_dir()}")
    from retrieval.loaders.shared import load_cranfield, load_qqp_pairs
    from retrieval.testing.byo import sample_pairs, write_beir, write_pairs

    write_beir(load_cranfield(relevance="gain"), tmp_path / "data" / "beir", n_queries=24,
               n_docs=200, seed=3)
    write_pairs(sample_pairs(load_qqp_pairs("full"), 400, seed=5), tmp_path / "data" / "p.jsonl")
    monkeypatch.setenv("REDIS_URL", redis_url)
    spec = {
        "kind": "rag-study", "name": "study-byo", "seed": 0,
        "retrieval": {"collection": "beir:data/beir",
                      "index": {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                                "knob": "ef_search", "values": [10, 40]}},
        "rerank": {"depths": [0, 5]},
        "latency": {"sample_queries": 2, "torch_threads": 1},
        "cache": {"name": "study-byo", "pairs": {"path": "data/p.jsonl"},
                  "cache": {"name": "rwb-study-byo"},
                  "tuning": {"grid_step": 0.001, "max_threshold": 0.3},
                  "latency": {"sizes": [200], "queries": 30, "warmup": 3}},
        "constraints": {"target_recall": 0.3},
        "optuna": {"n_trials": 12, "population_size": 6, "threshold_step": 0.05},
        "default": {"knob": 10, "depth": 5, "threshold": 0.2},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "run"
    assert main(["sweep", str(path), "--out", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["retrieval"]["collection"] == "beir"
    assert s["retrieval"]["dataset"]["path"] == str(tmp_path / "data" / "beir")
    assert s["retrieval"]["n_queries"] == 24
    assert s["cache"]["dataset"] == "pairs:p.jsonl"
    assert s["cache"]["data"]["pairs"]["path"] == str(tmp_path / "data" / "p.jsonl")
    assert "beir" in s["models"]["quality"] and "pairs:p.jsonl" in s["models"]["quality"]
    assert s["pareto_set"] and s["chosen"] is not None
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset"]["cache"]["name"] == "pairs:p.jsonl"
    assert manifest["dataset"]["retrieval"]["collection"] == "beir"
