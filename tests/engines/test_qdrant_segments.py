"""Qdrant's native segments (issue 31, item 1): a shard built as N segments of Qdrant's own
(default_segment_number N, one optimized slice each) reports N segments and is searched by
Qdrant over all of them; the force-merge (reload with default_segment_number 1, optimize) lowers
the count; a topology study uses them (``segmented: native``) and measures the merge's recall
change."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.indexes.base import SupportsNativeSegments
from retrieval.indexes.registry import create_index
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

BUILD = {"m": 8, "ef_construct": 32}


def test_a_shard_of_four_qdrant_segments_is_searched_whole_and_merged() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 16)).astype(np.float32)
    idx = create_index("qdrant", 16, "l2", BUILD, seed=0)
    assert isinstance(idx, SupportsNativeSegments)
    try:
        idx.set_segments(4)
        idx.build(x)
        assert idx.segment_count() == 4
        idx.set_search_params(hnsw_ef=200)
        res = idx.search(x[:20], 5)
        assert (np.asarray(res.ids)[:, 0] == np.arange(20)).all()  # every segment searched
        info = idx.merge_segments()
        assert info.extra["segments_before"] == 4 and info.extra["segments_after"] < 4
        assert (np.asarray(idx.search(x[:20], 5).ids)[:, 0] == np.arange(20)).all()
    finally:
        idx.close()
    with pytest.raises(Exception, match="segments must be in"):
        create_index("qdrant", 16, "l2", BUILD, seed=0).set_segments(0)  # type: ignore[attr-defined]


def test_a_qdrant_topology_study_uses_its_own_segments(tmp_path) -> None:
    spec = parse_spec({
        "name": "qseg", "dataset": {"kind": "synthetic", "n": 3000, "dim": 16, "n_queries": 100,
                                     "seed": 1},
        "k": 10, "target_recall": 0.9, "warmup": 0,
        "indexes": [{"backend": "qdrant", "build": BUILD}],
        "topology": {"segments": [1, 4]}}, source="qseg.yaml")
    s = run_sweep(spec, tmp_path / "run").summary
    rows = {r["segments"]: r for r in s["topology"]}
    assert rows[4]["segmented"] == "native" and rows[4]["segments_reported"] == 4
    assert "Qdrant segments" in rows[4]["segments_note"]
    m = rows[4]["maintain"]
    assert m["step"].startswith("optimize with default_segment_number 1")
    assert m["segments_after"] < 4
    assert m["recall_change"] == pytest.approx(m["recall_after"] - m["recall_before"])
