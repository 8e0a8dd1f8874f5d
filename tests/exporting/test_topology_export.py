"""``rwb export`` / ``rwb verify`` of a topology run (issue 31, item 5): the knob per segment
count, the config for the collection's count with the segment-count warning, and a verify that
rebuilds each count and re-measures (hnswlib in-process shards; pgvector native partitions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from retrieval.cli import main
from tests.helpers import export_and_verify

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


def _sweep(tmp_path: Path, entry: dict[str, Any], topology: dict[str, Any]) -> Path:
    spec = {"name": "topo-export", "dataset": {"kind": "synthetic", "n": 2000, "dim": 16,
                                               "n_queries": 80, "seed": 2},
            "target_recall": 0.9, "warmup": 0, "index_build": {"cache": False},
            "indexes": [entry], "topology": topology}
    (tmp_path / "topo.yaml").write_text(yaml.safe_dump(spec))
    assert main(["sweep", str(tmp_path / "topo.yaml"), "--out", str(tmp_path / "run")]) == 0
    return tmp_path / "run"



def test_hnswlib_topology_export_for_an_unmeasured_count_warns_and_verifies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _sweep(tmp_path, {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40}},
                 {"segments": [1, 4], "collection_segments": 8, "maintain": False})
    doc, text = export_and_verify(run, "hnswlib", tmp_path / "h.yaml", capsys)
    assert doc["kind"] == "ann-topology" and doc["segments"] == 8
    assert [e["segments"] for e in doc["by_segments"]] == [1, 4]
    assert doc["knob_source"] == "rule" and doc["knob_name"] == "ef_search"
    assert doc["config"]["ef"] == doc["knob"]  # hnswlib's own name for the knob
    for e in doc["by_segments"]:
        assert e["config"]["ef"] == e["knob"] and e["segmented"] == "shards"
    assert "has 8 segments" in doc["evidence"]["segments_warning"]
    assert "HOLDS" in text
    # one check per measured count and one for the collection's count (rule's knob)
    assert text.count("recall lower bound at") == 3 and "at 8 segments" in text


@pytest.mark.pgvector
@pytest.mark.usefixtures("pg_url")
def test_pgvector_partitions_export_the_measured_knob_and_verify(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _sweep(tmp_path, {"backend": "pgvector", "build": {"m": 8, "ef_construction": 40}},
                 {"segments": [1, 4], "collection_segments": 4, "maintain": False})
    doc, text = export_and_verify(run, "pgvector", tmp_path / "p.yaml", capsys)
    assert doc["segments"] == 4 and doc["knob_source"] == "measured"
    assert doc["evidence"]["segments_warning"] is None
    four = next(e for e in doc["by_segments"] if e["segments"] == 4)
    assert four["segmented"] == "native" and four["segments_reported"] == 4
    assert doc["knob"] == four["knob"]
    assert "HOLDS" in text and text.count("recall lower bound at") == 2
