"""A sweep with an ``adaptive:`` section: the typed ``adaptive`` list in summary.json (cost_unit,
mean, p5, vs_fixed), the per-query table it came from, the printed verdicts and the report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from retrieval.cli import main
from retrieval.errors import ConfigError
from retrieval.tune.spec import parse_spec
from retrieval.tune.summary import SweepSummary
from retrieval.tune.sweep import run_sweep

SPEC = {
    "name": "adaptive-small", "dataset": "synthetic-small", "k": 10, "modes": ["single"],
    "warmup": 0, "target_recall": 0.9,
    "indexes": [{"backend": "faiss-hnsw", "build": {"M": 8, "ef_construction": 40},
                 "search": {"ef_search": [10, 20, 40]}},
                {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                 "search": {"ef_search": [10, 20]}}],
    "tune": {"strategy": "grid", "heldout_fraction": 0.5},
    "adaptive": {"policies": ["ada_ef", "early_stop"], "pre_ef": 10, "bins": 2,
                 "ef_values": [10, 16, 24, 32, 48, 64]},
}


def test_sweep_summary_has_the_adaptive_entries_of_its_per_query_table(tmp_path, capsys) -> None:
    spec = tmp_path / "adaptive.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "adaptive policies vs the tuned fixed setting" in out
    assert out.count("ada_ef:") == 2 and out.count("early_stop:") == 2
    assert "hnswlib has no counter" in out
    typed = SweepSummary.model_validate(json.loads((tmp_path / "run" / "summary.json").read_text()))
    assert typed.adaptive is not None
    assert [(e.backend, e.policy) for e in typed.adaptive] == [
        ("faiss-hnsw", "ada_ef"), ("faiss-hnsw", "early_stop"), ("hnswlib", "ada_ef"),
        ("hnswlib", "early_stop")]
    for e in typed.adaptive[2:]:  # hnswlib counts nothing: listed, with the reason
        assert e.skipped and "hnswlib has no counter" in e.skipped and e.vs_fixed is None
    table = pd.read_parquet(tmp_path / "run" / "adaptive_queries.parquet")
    for e in typed.adaptive[:2]:
        assert e.cost_unit == "distance computations" and e.build == {"M": 8,
                                                                      "ef_construction": 40}
        mine = table[table.policy == e.policy]
        assert len(mine) == e.n_queries == typed.queries["heldout"]  # type: ignore[index]
        assert e.mean == pytest.approx(mine.recall.mean())
        assert e.p5 == pytest.approx(np.percentile(mine.recall, 5))
        assert e.cost == pytest.approx(mine.ndis.mean())
        assert e.vs_fixed is not None and e.vs_fixed.knob == "ef_search"
        assert e.vs_fixed.winner in ("fixed", "policy") and e.vs_fixed.verdict
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "r.html")]) == 0
    assert "Adaptive policies vs the tuned fixed setting" in (tmp_path / "r.html").read_text()


def test_adaptive_needs_a_plain_local_sweep_with_heldout_queries(tmp_path) -> None:
    with pytest.raises(ConfigError, match="heldout_fraction"):
        run_sweep(parse_spec({**SPEC, "tune": {"strategy": "grid", "heldout_fraction": 0}}),
                  tmp_path / "a")
    with pytest.raises(ConfigError, match="field 'adaptive' runs on a plain sweep"):
        run_sweep(parse_spec({**SPEC, "cold": True}), tmp_path / "b")
