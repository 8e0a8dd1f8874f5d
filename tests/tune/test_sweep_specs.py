"""The sweep specs in sweeps/ plan under every strategy, and the demo command runs end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.cli import main
from retrieval.paths import REPO_ROOT
from retrieval.tune.optuna_search import space_size
from retrieval.tune.spec import load_spec
from retrieval.tune.sweep import apply_overrides, check_tunable
from retrieval.tune.units import entry_labels, plan_units

SPECS = ["quickstart", "minilm-qqp-hnsw", "minilm-qqp20k-hnsw", "minilm-qqp20k-ivf",
         "pgvector-synthetic"]


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("strategy", ["grid", "target", "optuna"])
def test_spec_plans_under_every_strategy(name, strategy):
    spec = apply_overrides(load_spec(REPO_ROOT / "sweeps" / f"{name}.yaml"), strategy=strategy,
                           target=0.95)
    check_tunable(spec)
    units = plan_units(spec, "grid" if strategy == "grid" else "target")
    assert {u.entry for u in units} == set(range(len(spec.indexes)))
    if strategy == "target":
        knobbed = [u for u in units if u.method == "target"]
        assert knobbed and all(u.low < u.high for u in knobbed)
    if strategy == "optuna":
        assert space_size(spec, entry_labels(spec)) == len(units)


@pytest.mark.slow
def test_demo_command_tunes_every_quickstart_backend(tmp_path, capsys):
    out = tmp_path / "demo"
    args = ["sweep", str(Path(REPO_ROOT) / "sweeps" / "quickstart.yaml"), "--strategy",
            "target", "--target-recall", "0.95", "--out", str(out), "--json"]
    assert main(args) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["strategy"] == "target" and s["target_recall"] == 0.95
    assert set(s["backends"]) == {"faiss-flat", "hnswlib", "faiss-hnsw", "faiss-ivf", "milvus"}
    for label, b in s["backends"].items():
        assert b["chosen"] is not None, label
        assert b["chosen"]["recall_lb"] >= 0.95 and b["heldout_recall"] is not None
    for b in s["builds"]:
        if b["max_evaluations"] is not None:
            assert b["evaluations"] <= b["max_evaluations"]
    assert s["pareto"] and (out / "study.db").exists() and (out / "summary.json").exists()
