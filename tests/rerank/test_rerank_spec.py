"""The rerank sweep spec: every bad input is a one-line ConfigError naming file and field."""

import argparse

import pytest

from retrieval.cli import build_parser, main
from retrieval.errors import ConfigError
from retrieval.rerank.spec import load_rerank_spec, parse_rerank_spec


@pytest.mark.parametrize("name", ["scifact-rerank.yaml", "cranfield-rerank.yaml"])
def test_shipped_specs_load(name):
    from retrieval.paths import REPO_ROOT

    spec = load_rerank_spec(REPO_ROOT / "sweeps" / name)
    assert spec.depths == [0, 5, 10, 20, 30, 50, 100] and spec.fetch_k == 100
    assert spec.bm25.implementation == "rank-bm25" and spec.dense.backend == "faiss-flat"
    assert spec.metrics == ("ndcg@10", "recall@100", "mrr@10")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"dataset": "msmarco"}, "field 'dataset' must be 'scifact' or 'cranfield'"),
        ({"dataset": "scifact", "depth": [1]}, "Did you mean 'depths'?"),
        ({"dataset": "scifact", "depths": [0, 5, 5]}, "field 'depths': depths must be distinct"),
        ({"dataset": "scifact", "depths": [-1, 5]}, "field 'depths': each depth must be in"),
        ({"dataset": "scifact", "depths": []}, "field 'depths'"),
        ({"dataset": "scifact", "tolerance": 2}, "field 'tolerance' must be <= 1"),
        ({"dataset": "scifact", "bm25": {"k1": 0}}, "field 'bm25.k1' must be > 0"),
        ({"dataset": "scifact", "reranker": {"kind": "cross-encoder"}}, "needs 'model'"),
        ({"dataset": "scifact", "reranker": {"kind": "colbert"}}, "field 'reranker.kind'"),
        ({"dataset": "scifact", "dense": {"backend": "faiss-hsnw"}},
         "unknown backend 'faiss-hsnw'"),
        ({"dataset": "scifact", "dense": {"backend": "faiss-hnsw", "build": {"M": -3}}},
         "field 'dense.build.M' must be >= 2"),
        ({"dataset": "scifact", "router": {"rerank_depth": 7}},
         "field 'router.rerank_depth' must be one of depths"),
        ({"dataset": "cranfield", "split": "train"}, "field 'split' must be test"),
        ({"dataset": "scifact", "metric": "map"}, "field 'metric'"),
    ],
)
def test_bad_specs(data, fragment):
    with pytest.raises(ConfigError) as exc:
        parse_rerank_spec(data, source="s.yaml")
    msg = str(exc.value)
    assert msg.startswith("s.yaml: ") and fragment in msg and "\n" not in msg


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_rerank_spec(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: [scifact\n")
    with pytest.raises(ConfigError, match="malformed YAML at line"):
        load_rerank_spec(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_rerank_spec(listy)


def test_tune_group_discovers_rerank(capsys, tmp_path):
    args = build_parser().parse_args(["tune", "rerank", "x.yaml", "--json", "--max-queries", "9"])
    assert isinstance(args, argparse.Namespace)
    assert args.func.__module__ == "retrieval.cli.tune_rerank" and args.max_queries == 9
    assert main(["tune", "rerank", str(tmp_path / "nope.yaml")]) == 2
    assert "rwb: error: spec file" in capsys.readouterr().err
    assert main(["tune"]) == 2  # the group alone prints its help
