"""`rwb tune rerank` on the user's own collection: a BEIR folder (a real 200-document cut of
Cranfield, graded qrels) and the same folder named by a dataset manifest, with BM25 or the
user's TREC run file as first stage. Exact dense nDCG@10 equals a hand computation with ranx on
the same vectors; the TREC runs written open in ranx with the recorded scores; export + verify
round-trips on that folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from retrieval.cli import main
from tests.helpers import cranfield_beir

pytestmark = pytest.mark.slow

SPEC = {
    "name": "byo-rerank",
    "depths": [0, 5, 10],
    "recall_k": 50,
    "bm25": {"token_pattern": r"\w+"},
    "latency": {"sample_queries": 1, "warmup": 0},
    "router": {"quantiles": 4},
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cranfield_beir(tmp_path_factory.mktemp("byo") / "my-beir", n_queries=24, n_docs=200)


@pytest.fixture(scope="module")
def tuned(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("byo-run")
    spec = base / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "dataset": f"beir:../{base.name}-data"}))
    (base.parent / f"{base.name}-data").symlink_to(folder)  # a path relative to the spec file
    out = base / "run"
    pytest.importorskip("ranx")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["tune", "rerank", str(spec), "--out", str(out), "--json"]) == 0
    return {"summary": json.loads(buf.getvalue()), "out": out}


def _qrels(folder: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        qrels.setdefault(q, {})[d] = int(g)
    return qrels


@pytest.mark.model
def test_json_keeps_its_keys_and_names_the_folder(tuned: dict[str, Any], folder: Path) -> None:
    s = tuned["summary"]
    for key in ("dense_ndcg@10", "bm25_ndcg@10", "chosen_depth"):
        assert key in s
    assert s["dataset"] == folder.name  # the BEIR folder's name, as before for the built-ins
    assert Path(s["dataset_path"]) == folder.resolve() and s["dataset_split"] == "test"
    assert s["n_docs"] == 200 and s["n_queries"] == 24
    grades = {g for docs in _qrels(folder).values() for g in docs.values()}
    assert len(grades) > 1 and "graded: gain = grade" in s["relevance"]
    assert s["bm25"]["token_pattern"] == r"\w+"
    manifest = json.loads((tuned["out"] / "manifest.json").read_text())
    assert Path(manifest["dataset"]["path"]) == folder.resolve()
    assert manifest["dataset"]["fingerprint"] == s["dataset_fingerprint"]


@pytest.mark.model
def test_exact_dense_ndcg_equals_ranx_on_the_same_vectors(tuned: dict[str, Any],
                                                          folder: Path) -> None:
    from ranx import Qrels, Run, evaluate

    from retrieval.embed import get_embedder

    corpus = [json.loads(x) for x in (folder / "corpus.jsonl").read_text().splitlines()]
    docs = [(d["_id"], f"{d['title']} {d['text']}".strip()) for d in corpus]
    docs = [(i, t) for i, t in docs if t]  # blank documents have nothing to embed
    queries = [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines()]
    emb = get_embedder(None)
    xb = emb.embed([t for _, t in docs])
    xq = emb.embed([q["text"] for q in queries])
    sims = xq @ xb.T  # MiniLM vectors are unit-norm: cosine similarity
    run = {}
    for i, q in enumerate(queries):
        top = np.argsort(-sims[i], kind="stable")[:50]
        run[q["_id"]] = {docs[j][0]: float(sims[i, j]) for j in top}
    hand = evaluate(Qrels(_qrels(folder)), Run(run), "ndcg@10")
    assert tuned["summary"]["dense_ndcg@10"] == pytest.approx(hand, abs=1e-6)


def test_trec_runs_open_in_ranx_with_the_recorded_scores(tuned: dict[str, Any],
                                                         folder: Path) -> None:
    from ranx import Qrels, Run, evaluate

    s = tuned["summary"]
    assert set(s["trec_runs"]) == {"depth_0", "chosen", "best"}
    qrels = Qrels(_qrels(folder))
    for role, depth in (("depth_0", 0), ("chosen", s["chosen_depth"]),
                        ("best", s["best_depth"])):
        path = tuned["out"] / s["trec_runs"][role]
        assert path.name == f"depth-{depth}.trec"
        got = evaluate(qrels, Run.from_file(str(path), kind="trec"), ["ndcg@10", "recall@50"])
        row = next(c for c in s["curve"] if c["depth"] == depth)
        assert got["ndcg@10"] == pytest.approx(row["all"]["ndcg@10"], abs=1e-9)
        assert got["recall@50"] == pytest.approx(row["all"]["recall@50"], abs=1e-9)


def test_export_and_verify_round_trip_on_the_folder(tuned: dict[str, Any], folder: Path,
                                                    tmp_path: Path, capsys) -> None:
    out = tmp_path / "rerank.yaml"
    assert main(["export", str(tuned["out"]), "--engine", "rerank", "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    ev = doc["evidence"]["dataset"]
    assert Path(ev["path"]) == folder.resolve() and ev["collection"] == folder.name
    assert ev["fingerprint"] == tuned["summary"]["dataset_fingerprint"]
    capsys.readouterr()
    assert main(["verify", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["holds"] is True and report["measured"]["heldout_queries"] == 12


@pytest.mark.model
def test_manifest_name_and_a_trec_run_as_first_stage(tuned: dict[str, Any], folder: Path,
                                                     tmp_path: Path, monkeypatch) -> None:
    """The user's retriever output (here: the first run's BM25 order, written as TREC) reranked
    through a manifest name: the same candidates give the same quality at every depth."""
    from retrieval.rerank.run import run_rerank_sweep
    from retrieval.rerank.spec import parse_rerank_spec

    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "my-beir.yaml").write_text(f"kind: text\ncollection: beir:{folder}\n")
    monkeypatch.setenv("RWB_DATASETS_DIR", str(manifests))
    first = tuned["out"] / tuned["summary"]["trec_runs"]["depth_0"]
    spec = parse_rerank_spec({**SPEC, "dataset": "my-beir", "first_stage": {"run": str(first)},
                              "router": {"enabled": False}}, source="test")
    s = run_rerank_sweep(spec, tmp_path / "run").summary
    assert s["dataset_info"]["spec"] == "my-beir"
    assert s["dataset_fingerprint"] == tuned["summary"]["dataset_fingerprint"]
    assert s["sweep_first_stage"] == "run" and s["run_file"]["judged_queries_missing"] == 0
    assert s["run_file"]["unknown_docs_dropped"] == 0
    before = {c["depth"]: c["all"] for c in tuned["summary"]["curve"]}
    for c in s["curve"]:
        assert c["all"]["ndcg@10"] == pytest.approx(before[c["depth"]]["ndcg@10"], abs=1e-9)
