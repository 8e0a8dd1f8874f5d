"""The cross-layer study end to end on the shared data with a tiny budget: `rwb sweep
SPEC --json` on a rag-study spec writes its Pareto set, the choice, the significance test and a
run directory `rwb report` renders. Needs ../shared/data (SciFact, QQP) and a Redis with the
search module (REDIS_URL, else one started from the PyPI wheels)."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest

from retrieval.cli import main
from retrieval.paths import data_dir

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

TINY = textwrap.dedent("""\
    kind: rag-study
    name: study-e2e
    seed: 0
    retrieval:
      max_queries: 40
      index:
        backend: faiss-ivf
        build: {nlist: 16, encoding: pq, pq_m: 24}
        knob: nprobe
        values: [1, 4, 16]
    rerank:
      depths: [0, 5, 10]
    latency: {sample_queries: 3, torch_threads: 1}
    cache:
      name: study-e2e
      pairs: {limit: 300, seed: 0}
      cache: {name: rwb-study-e2e}
      tuning: {grid_step: 0.001, max_threshold: 0.3}
      latency: {sizes: [200], queries: 50, warmup: 5}
    constraints: {target_recall: 0.3}
    optuna: {n_trials: 30, population_size: 10, threshold_step: 0.01}
    default: {knob: 1, depth: 10, threshold: 0.2}
""")


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.model
def test_study_tiny_budget_writes_pareto_set_and_report(tmp_path, capsys, monkeypatch, redis_url):
    for name in ("scifact", "gptcache_qqp"):
        if not (data_dir() / name).is_dir():
            pytest.skip(f"shared data '{name}' not found under {data_dir()}")
    monkeypatch.setenv("REDIS_URL", redis_url)
    spec = tmp_path / "study.yaml"
    spec.write_text(TINY)
    out = tmp_path / "run"
    assert main(["sweep", str(spec), "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    summary = json.loads((out / "summary.json").read_text())
    assert printed == summary
    assert summary["kind"] == "rag-study"
    assert [o["name"] for o in summary["objectives"]] == ["ndcg_e2e", "p95_ms", "usd_per_1k"]
    assert summary["optuna"]["trials"] == 30
    front = summary["pareto_set"]
    assert front, "a feasible config exists at recall target 0.3"
    for p in front:
        t = p["tuning"]
        assert t["feasible"] and t["recall_lb"] >= 0.3
        assert t["false_hit_upper_bound"] <= summary["constraints"]["max_false_hit"]
        assert 0.0 <= t["ndcg_e2e"] <= t["ndcg_path"] <= 1.0 and t["p95_ms"] > 0
    ex = summary["exhaustive"]
    assert ex["grid_size"] == 3 * 3 * 31 and 0 < ex["front_found_by_optuna"] <= ex["front_size"]
    chosen = summary["chosen"]
    assert chosen is not None and "heldout" in chosen
    sig = summary["significance"]
    assert sig["library"] == "ranx.compare" and 0.0 <= sig["p_value"] <= 1.0
    assert sig["wins"] + sig["ties"] + sig["losses"] == sig["n_queries"] == 20
    assert len(pd.read_parquet(out / "trials.parquet")) == 30
    assert len(pd.read_parquet(out / "grid.parquet")) == ex["grid_size"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "rag-study" and manifest["git"]["sha"]
    assert main(["report", str(out)]) == 0
    pngs = sorted(p.name for p in out.glob("report_*.png"))
    assert pngs == ["report_study_chosen_vs_default.png", "report_study_pareto.png",
                    "report_study_path_surface.png"]
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "Pareto set" in page
