"""`rwb tune rerank` end to end on the shared SciFact data (a seeded 40-query subset, 1 timed
query), through the CLI entry point: --json keys, run directory, invariants of the curve."""

import json

import pytest

from retrieval.cli import main
from retrieval.cli.tune_rerank import print_summary
from retrieval.errors import DataError
from retrieval.paths import REPO_ROOT

pytestmark = pytest.mark.slow

# measured on this seeded 40-query subset (BM25 is exact, dense varies with float sums)
BM25_NDCG = 0.6564
DENSE_NDCG = 0.5519


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    from retrieval.loaders.shared import shared_folder

    try:
        shared_folder("scifact")
    except DataError as exc:
        pytest.skip(f"SciFact data folder absent: {exc}")
    out = tmp_path_factory.mktemp("rerank-run")
    spec = REPO_ROOT / "sweeps" / "scifact-rerank.yaml"
    # 1 timed query (was 2): each timed call re-encodes its passages (5 to 100 of them at every
    # depth), the bulk of this run once the corpus is embedded; one query still times every
    # depth, so latency growing with depth is checked below
    return out, [str(spec), "--out", str(out), "--max-queries", "40", "--sample-queries", "1"]


@pytest.mark.model
def test_json_summary_and_run_directory(cli_run, capsys, assert_rule_depth):
    out, argv = cli_run
    assert main(["tune", "rerank", *argv, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["bm25_ndcg@10"] == pytest.approx(BM25_NDCG, abs=0.001)
    assert s["dense_ndcg@10"] == pytest.approx(DENSE_NDCG, abs=0.003)
    # the chosen depth is the rule's (here no rerank: every depth lowers tuning nDCG@10 by more
    # than the tolerance), not merely one of the offered depths
    assert_rule_depth(s)
    assert s["chosen_depth"] == 0 and s["no_rerank_wins"] is True
    assert s["n_queries"] == 40 and s["n_tuning"] + s["n_heldout"] == 40
    assert s["bm25"]["implementation"] == "rank-bm25" and s["bm25"]["k1"] == 1.5
    curve = {c["depth"]: c for c in s["curve"]}
    assert sorted(curve) == [0, 5, 10, 20, 30, 50, 100]
    # depth 0 is the first stage itself
    assert curve[0]["all"]["ndcg@10"] == pytest.approx(s["bm25_ndcg@10"])
    # reranking only permutes the top 100, and the tail keeps its order: recall@100 is invariant
    assert len({round(c["all"]["recall@100"], 12) for c in curve.values()}) == 1
    # the chosen depth is within tolerance of the best on the tuning split
    best = max(c["tuning"]["ndcg@10"] for c in curve.values())
    assert curve[s["chosen_depth"]]["tuning"]["ndcg@10"] >= best - s["tolerance"] - 1e-12
    assert curve[100]["latency"]["rerank_p50_ms"] > curve[5]["latency"]["rerank_p50_ms"] > 0
    assert curve[0]["latency"]["rerank_p50_ms"] == 0
    r = s["router"]
    assert r["threshold_unit"].startswith("cosine similarity")
    assert set(r["heldout"]) == {"chosen", "never", "always"}
    for name in ("manifest.json", "summary.json", "spec.yaml", "curve.parquet",
                 "per_query.parquet", "latency.parquet", "router.parquet"):
        assert (out / name).is_file(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "rerank-sweep" and manifest["dataset"]["fingerprint"]
    assert manifest["bm25"]["variant"] == "rank_bm25.BM25Okapi"
    # the human-readable report of the same summary
    print_summary(json.loads((out / "summary.json").read_text()))
    text = capsys.readouterr().out
    assert "chosen depth:" in text and "BM25 fallback: threshold" in text and "p95_ms" in text
