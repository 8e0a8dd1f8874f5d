"""The rerank sweep on Cranfield (graded judgments, two blank documents), a small seeded subset:
grades become gains (5 - grade), blank documents are never indexed, nothing is unknown."""

import pytest

from retrieval.errors import DataError
from retrieval.rerank.run import run_rerank_sweep
from retrieval.rerank.spec import parse_rerank_spec

pytestmark = pytest.mark.slow


def test_cranfield_sweep_small(tmp_path):
    from retrieval.loaders.shared import shared_folder

    try:
        shared_folder("cranfield")
    except DataError as exc:
        pytest.skip(f"Cranfield data folder absent: {exc}")
    spec = parse_rerank_spec(
        {
            "dataset": "cranfield",
            "name": "cran-small",
            "max_queries": 24,
            "depths": [0, 10, 30],
            "latency": {"sample_queries": 1, "warmup": 0},
            "router": {"quantiles": 4},
        },
        source="test",
    )
    s = run_rerank_sweep(spec, tmp_path / "run").summary
    assert s["n_docs"] == 1400 and s["n_queries"] == 24
    assert "gain = 5 - grade" in s["relevance"]
    assert s["unknown_judged_doc_ids"] == {}
    assert 0.2 < s["bm25_ndcg@10"] < 0.8 and 0.2 < s["dense_ndcg@10"] < 0.8
    assert s["chosen_depth"] in (0, 10, 30)
    assert s["router"]["threshold_unit"].startswith("cosine similarity")
    assert (tmp_path / "run" / "summary.json").is_file()
