"""Rerank depth as the quality target's second knob: ``target: {ndcg_non_inferior: M}`` in a
rerank spec chooses the cheapest (hnswlib ef_search, rerank depth) pair non-inferior to exact
search reranked at the largest depth, beside the recall-0.95 choice.

On the SciFact cut the sweep quality target uses (40 judged claims, 440 abstracts, MiniLM;
embedded once). The reranker is a test device that knows the answers (score 1 for a passage
judged relevant to the claim, else 0) and sleeps 0.3 ms per passage, so reranking deeper
finds more and costs more: the reference is strong, small depths miss it, and the cost the
choice minimises grows with the depth. The reference nDCG@10 is recomputed here (brute force on
the same vectors, the same reranking, ranx)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.errors import ConfigError
from tests.helpers import cli_ok, one_line, scifact_cut

MARGIN = 0.01
DEPTHS = [0, 2, 5, 10, 30]
#: query text -> the texts of the passages judged relevant to it (filled by the fixture)
RELEVANT: dict[str, set[str]] = {}


def knows_the_answers(query: str, passages: Sequence[str]) -> list[float]:
    """1.0 for a passage judged relevant to ``query``, else 0.0; 0.3 ms per passage."""
    time.sleep(0.0003 * len(passages))
    return [1.0 if p in RELEVANT.get(query, ()) else 0.0 for p in passages]


def spec_doc(folder: Path, **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "rerank-quality", "dataset": f"beir:{folder}", "first_stage": "dense",
        "dense": {"backend": "hnswlib", "build": {"M": 4, "ef_construction": 20},
                  "search": {"ef_search": 30}},
        "reranker": {"kind": "callable"}, "depths": DEPTHS, "recall_k": 30,
        "latency": {"sample_queries": 5, "warmup": 0}, "router": {"enabled": False},
        "target": {"ndcg_non_inferior": MARGIN}, "knob_range": [30, 200],
    }
    doc.update(over)
    return doc


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scifact_cut(tmp_path_factory.mktemp("beir") / "scifact-cut")


@pytest.fixture(scope="module")
def tuned(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from retrieval.loaders.beir import load_beir
    from retrieval.rerank.run import run_rerank_sweep
    from retrieval.rerank.spec import parse_rerank_spec

    coll = load_beir(folder)
    for q, docs in coll.qrels.items():
        RELEVANT[coll.queries[q]] = {coll.corpus[d] for d, g in docs.items()
                                     if g >= 1 and d in coll.corpus}
    spec = parse_rerank_spec(spec_doc(folder), source="test")
    out = tmp_path_factory.mktemp("rq") / "run"
    s = run_rerank_sweep(spec, out, reranker=knows_the_answers).summary
    return {"summary": s, "folder": folder, "coll": coll}


@pytest.mark.model
@pytest.mark.slow
def test_the_pair_found_passes_and_the_depth_below_it_fails(tuned: dict[str, Any]) -> None:
    q = tuned["summary"]["quality"]
    assert q["metric"] == "ndcg@10" and q["margin"] == MARGIN and q["knob"] == "ef_search"
    assert q["n_queries"] == tuned["summary"]["n_tuning"] == 20
    best = q["quality"]
    assert best is not None and (best["knob_value"], best["depth"]) == (
        q["knob_quality"], q["depth_quality"])
    # the pair found passes the test: the lower 95% bound of the mean difference is above -M
    assert best["non_inferior"] and best["lower_bound"] > -MARGIN and best["p_value"] < 0.05
    assert best["value"] >= q["exact"] - MARGIN
    rows = {r["depth"]: r for r in q["by_depth"]}
    assert sorted(rows) == DEPTHS
    smaller = [d for d in DEPTHS if d < q["depth_quality"]]
    assert smaller, "the reference is strong: reranking nothing cannot be non-inferior"
    for d in smaller:  # every smaller depth fails, even at the most accurate ef_search
        assert rows[d]["knob_value"] is None and not rows[d]["non_inferior"]
        assert rows[d]["probes"] == [200]
        worst = rows[d]["at_most_accurate"]
        assert worst["knob_value"] == 200 and worst["lower_bound"] <= -MARGIN
    # the choice is the cheapest feasible pair by the stated cost (ms)
    feasible = [r for r in q["by_depth"] if r["knob_value"] is not None]
    assert best["cost_ms"] == min(r["cost_ms"] for r in feasible)
    assert best["cost_ms"] == pytest.approx(best["dense_p50_ms"] + best["rerank_p50_ms"])
    assert best["candidates_scored"] == best["depth"]
    assert best["distance_computations"] is None  # hnswlib counts none


@pytest.mark.model
@pytest.mark.slow
def test_the_recall_choice_stands_beside_it(tuned: dict[str, Any]) -> None:
    s = tuned["summary"]
    q = s["quality"]
    assert q["depth_recall"] == s["chosen_depth"] and q["recall_target"] == 0.95
    assert q["knob_recall"] is not None and 30 <= q["knob_recall"] <= 200
    r = q["recall"]
    assert r["knob_value"] == q["knob_recall"] and r["recall"] >= 0.95
    assert q["agree"] == (q["knob_recall"] == q["knob_quality"]
                          and q["depth_recall"] == q["depth_quality"])
    assert "cost_ms" in q["cost_unit"] and "p50" in q["cost_unit"]


@pytest.mark.model
@pytest.mark.slow
def test_rwb_tune_rerank_prints_both_pairs(tuned: dict[str, Any],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from retrieval.cli.tune_rerank import print_summary

    print_summary(tuned["summary"])
    out = capsys.readouterr().out
    q = tuned["summary"]["quality"]
    assert (f"pair by quality (ef_search={q['knob_quality']}, depth {q['depth_quality']}) vs "
            f"recall-0.95 (ef_search={q['knob_recall']}, depth {q['depth_recall']})") in out
    assert ("agree" if q["agree"] else "disagree") in out


@pytest.mark.model
@pytest.mark.slow
def test_the_reference_is_exact_search_reranked_at_the_largest_depth(
        tuned: dict[str, Any]) -> None:
    from retrieval.embed import get_embedder
    from retrieval.rerank.run import judged_query_ids
    from retrieval.rerank.tune import split_queries
    from retrieval.stats.irmetrics import evaluate_collection

    coll = tuned["coll"]
    tuning, _ = split_queries(judged_query_ids(coll, None, 0), 0.5, 0)
    ids = [d for d in coll.corpus if coll.corpus[d].strip()]
    emb = get_embedder(None)
    docs = emb.embed([coll.corpus[d] for d in ids])
    qv = emb.embed([coll.queries[q] for q in tuning])
    docs = docs / np.linalg.norm(docs, axis=1, keepdims=True)  # cosine
    qv = qv / np.linalg.norm(qv, axis=1, keepdims=True)
    top = np.argsort(-(qv @ docs.T), axis=1, kind="stable")[:, :30]
    ranked = {}
    for qid, row in zip(tuning, top, strict=True):
        head = [ids[j] for j in row]
        score = knows_the_answers(coll.queries[qid], [coll.corpus[d] for d in head])
        order = np.argsort(-np.asarray(score), kind="stable")
        ranked[qid] = [head[i] for i in order][:10]
    want = evaluate_collection(coll, ranked, ["ndcg@10"], query_ids=tuning).means["ndcg@10"]
    assert tuned["summary"]["quality"]["exact"] == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("over, needles", [
    ({"first_stage": "bm25"}, ("field 'target'", "first_stage must be dense", "received bm25")),
    ({"dense": {"backend": "faiss-flat"}}, ("field 'target'", "monotone search knob",
                                            "received dense.backend 'faiss-flat'")),
    ({"knob_range": [5, 200]}, ("field 'knob_range'", "within [30, 4096]", "received [5, 200]")),
])
def test_what_the_target_cannot_work_with_is_one_line(folder: Path, over: dict[str, Any],
                                                      needles: tuple[str, ...]) -> None:
    from retrieval.rerank.spec import parse_rerank_spec

    with pytest.raises(ConfigError) as exc:
        parse_rerank_spec(spec_doc(folder, **over), source="spec.yaml")
    one_line(exc, "spec.yaml", *needles)


@pytest.mark.model
@pytest.mark.slow
def test_the_report_has_the_quality_target_table(tuned: dict[str, Any], tmp_path: Path) -> None:
    from retrieval.api import report

    report(tuned["summary"]["run_dir"], tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text("utf-8")
    assert "Quality target</h2>" in html
    assert f"ef_search={tuned['summary']['quality']['knob_recall']} at depth" in html


@pytest.mark.model
@pytest.mark.slow
def test_the_rerank_export_carries_both_pairs(tuned: dict[str, Any], tmp_path: Path) -> None:
    import yaml

    out = tmp_path / "rerank.yaml"
    cli_ok("export", tuned["summary"]["run_dir"], "--engine", "rerank", "--out", str(out))
    doc = yaml.safe_load(out.read_text("utf-8"))
    q, want = doc["evidence"]["quality"], tuned["summary"]["quality"]
    for key in ("knob_recall", "depth_recall", "knob_quality", "depth_quality", "agree"):
        assert q[key] == want[key], key
    assert doc["rerank"]["depth"] == want["depth_recall"]  # the tolerance rule's depth
    assert q["at_quality_pair"]["lower_bound"] == want["quality"]["lower_bound"]
