"""``rwb export`` / ``rwb verify`` of a tenants run (issue 31, item 5): the chosen layout with
its knob, the crossover and every layout's knob; verify re-runs that layout and judges its
tenants again (hnswlib in-process; Redis TAG as a service engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from retrieval.cli import main
from tests.helpers import export_and_verify

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


def _sweep(tmp_path: Path, entry: dict[str, Any], tenants: dict[str, Any]) -> Path:
    spec = {"name": "tenants-export", "dataset": {"kind": "synthetic", "n": 1500, "dim": 16,
                                                  "n_queries": 90, "seed": 4},
            "k": 10, "target_recall": 0.8, "warmup": 0, "indexes": [entry],
            "tenants": {"count": 8, "sizes": {"zipf": 1.1}, "min_queries": 3, **tenants}}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(spec))
    assert main(["sweep", str(tmp_path / "t.yaml"), "--out", str(tmp_path / "run")]) == 0
    return tmp_path / "run"



def test_hnswlib_tenants_export_has_layout_knobs_crossover_and_verifies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _sweep(tmp_path, {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                            "search": {"ef_search": [10, 40]}}, {})
    summary = yaml.safe_load((run / "summary.json").read_text())
    doc, text = export_and_verify(run, "hnswlib", tmp_path / "export.yaml", capsys)
    assert doc["kind"] == "ann-tenants"
    assert {p["layout"] for p in doc["layouts"]} == {"shared", "per_tenant", "flat_index"}
    by = {p["layout"]: p for p in summary["layouts"]}
    for p in doc["layouts"]:  # every layout's knob, in rwb's and hnswlib's names
        assert p["search"] == by[p["layout"]]["search"]
        assert p["config"]["ef"] == p["search"]["ef_search"]
    chosen = by[doc["layout"]]
    assert chosen["meets"] and doc["search"] == chosen["search"]
    assert chosen["p95_ms"] == min(p["p95_ms"] for p in summary["layouts"] if p["meets"])
    flat = next(p for p in doc["layouts"] if p["layout"] == "flat_index")
    assert flat["crossover"] == by["flat_index"]["crossover"]
    if doc["layout"] == "flat_index":
        assert doc["crossover"] == flat["crossover"]
    assert "HOLDS" in text and "ids of another tenant returned: measured 0" in text


@pytest.mark.redis
def test_redis_tag_layout_exported_and_verified(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], redis_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    run = _sweep(tmp_path, {"backend": "redis", "build": {"M": 8, "EF_CONSTRUCTION": 32},
                            "search": {"EF_RUNTIME": [10, 40]}}, {"layouts": ["shared"]})
    doc, text = export_and_verify(run, "redis", tmp_path / "r.yaml", capsys)
    assert doc["layout"] == "shared" and doc["tenant_filter"]
    assert doc["layouts"][0]["filter"] == "engine"
    assert "HOLDS" in text
