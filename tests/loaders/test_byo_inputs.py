"""The user's own files, read before any model or server: RWB_DATASETS_DIR as a folder list,
labelled pair files, TREC run files, the rerank / cache / study spec forms that name them, the
BM25 tokenisation settings (equal to rank-bm25 on the same tokens), the explicit held-out split.
Every bad input is one line naming the file, the field and the value received."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from retrieval import paths
from retrieval.cli import main
from retrieval.errors import ConfigError, DataError
from retrieval.loaders import catalog
from retrieval.loaders.pairs import read_pairs, read_texts
from retrieval.loaders.trec import read_run, write_run
from retrieval.testing.byo import write_pairs

ROWS = [("how do I learn python", "what is the best way to learn python", 1),
        ("how tall is everest", "how old is the moon", 0),
        ("is coffee bad for you", "is coffee unhealthy", 1)]


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


# --------------------------------------------------------------------------- RWB_DATASETS_DIR


def test_datasets_dir_is_a_list_searched_before_the_builtins(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "mine.yaml").write_text("kind: synthetic\nn: 10\ndim: 4\nn_queries: 2\n")
    (second / "mine.yaml").write_text("kind: synthetic\nn: 20\ndim: 4\nn_queries: 2\n")
    (second / "synthetic-small.yaml").write_text("kind: synthetic\nn: 30\ndim: 4\nn_queries: 2\n")
    monkeypatch.setenv("RWB_DATASETS_DIR", f"{first}{os.pathsep}{second}{os.pathsep}")
    assert paths.manifests_dirs() == [first, second, paths.builtin_manifests_dir()]
    assert paths.manifests_dir() == first
    found = catalog.manifest_paths()
    assert found["mine"] == first / "mine.yaml"  # the first folder wins
    assert found["synthetic-small"] == second / "synthetic-small.yaml"  # shadows the built-in
    assert found["synthetic-20k"].parent == paths.builtin_manifests_dir()  # built-ins still there
    assert catalog.resolve_dataset("synthetic-small").n_base == 30
    monkeypatch.setenv("RWB_DATASETS_DIR", f"{first}{os.pathsep}{tmp_path / 'nope'}")
    with pytest.raises(ConfigError) as exc:
        paths.manifests_dirs()
    assert "RWB_DATASETS_DIR" in one_line(exc) and "'nope'" not in str(exc.value)
    assert f"entry '{tmp_path / 'nope'}'" in str(exc.value) and "does not exist" in str(exc.value)


# --------------------------------------------------------------------------- pair files


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv"])
def test_pairs_round_trip_in_every_format(tmp_path, fmt):
    path = write_pairs(ROWS, tmp_path / f"p.{fmt}", fmt, bool_labels=fmt == "csv")
    got = read_pairs(path)
    assert [(p.text_a, p.text_b, p.label) for p in got] == ROWS
    custom = write_pairs(ROWS, tmp_path / f"c.{fmt}", fmt, columns=("q1", "q2", "same"))
    got = read_pairs(custom, text_a="q1", text_b="q2", label="same")
    assert [p.label for p in got] == [1, 0, 1]


def test_pairs_bad_input_is_one_line_naming_file_field_value(tmp_path):
    path = write_pairs(ROWS, tmp_path / "p.jsonl")
    with pytest.raises(DataError) as exc:
        read_pairs(path, text_a="question")
    msg = one_line(exc)
    assert str(path) in msg and "field 'pairs.text_a'" in msg and "'question'" in msg
    assert "columns found: 'a', 'b', 'duplicate'" in msg
    csv = tmp_path / "p.csv"
    csv.write_text("a,b,duplicate\nx,y,1\nx,z,maybe\n")
    with pytest.raises(DataError) as exc:
        read_pairs(csv)
    assert one_line(exc) == (f"{csv}:3: column 'duplicate' must be 0, 1, true or false; "
                             f"received 'maybe'")
    empty = tmp_path / "e.tsv"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match=r"e\.tsv: the file is empty"):
        read_pairs(empty)
    latin = tmp_path / "l.jsonl"
    latin.write_bytes(b'{"a": "x", "b": "y", "duplicate": 1}\n{"a": "caf\xe9", "b": "y"}\n')
    with pytest.raises(DataError) as exc:
        read_pairs(latin)
    assert one_line(exc).startswith(f"{latin}:2: not UTF-8 text (byte 0xe9 at column 11)")
    with pytest.raises(DataError, match=r"pairs file not found"):
        read_pairs(tmp_path / "absent.jsonl")
    with pytest.raises(ConfigError, match=r"field 'pairs.format' must be one of jsonl, csv"):
        read_pairs(tmp_path / "x.parquet")
    txt = tmp_path / "d.txt"
    txt.write_text("one\n\ntwo\n")
    assert read_texts(txt) == ["one", "two"]


# --------------------------------------------------------------------------- TREC runs


def test_trec_run_round_trip_and_errors(tmp_path):
    run = {"q1": ["d3", "d1", "d2"], "q2": ["d2"]}
    path = write_run(tmp_path / "r.trec", run, "my system")
    assert path.read_text().splitlines()[0] == "q1 Q0 d3 1 3 my_system"
    got = read_run(path)
    assert {q: [d for d, _ in docs] for q, docs in got.items()} == run
    shuffled = tmp_path / "s.trec"  # read as trec_eval does: by score, not by line order
    shuffled.write_text("q1 Q0 a 2 0.5 x\nq1 Q0 b 1 0.9 x\nq1 Q0 c 3 0.5 x\n")
    assert [d for d, _ in read_run(shuffled)["q1"]] == ["b", "a", "c"]
    bad = tmp_path / "b.trec"
    bad.write_text("q1 Q0 a 1 0.5\n")
    with pytest.raises(DataError) as exc:
        read_run(bad)
    assert one_line(exc).startswith(f"{bad}:1: expected 6 whitespace-separated columns")
    bad.write_text("q1 Q0 a 1 high x\n")
    with pytest.raises(DataError, match=r"b\.trec:1: column 'score' must be a number; "
                                        r"received 'high'"):
        read_run(bad)
    bad.write_text("q1 Q0 a 1 1 x\nq1 Q0 a 2 0.5 x\n")
    with pytest.raises(DataError, match=r"b\.trec:2: document 'a' appears twice"):
        read_run(bad)
    bad.write_text("")
    with pytest.raises(DataError, match=r"the run file is empty"):
        read_run(bad)


# --------------------------------------------------------------------------- spec forms


def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": f"d{i}", "text": t})
                                                   for i, t in enumerate(["a b", "c d", "e"])))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "a"}))
    (folder / "qrels" / "test.tsv").write_text("q1\td0\t1\n")
    return folder


def test_rerank_spec_takes_beir_manifest_and_run_file_forms(tmp_path, monkeypatch):
    from retrieval.rerank.spec import load_rerank_spec, parse_rerank_spec

    _beir(tmp_path / "specs" / "data" / "mine")
    spec_file = tmp_path / "specs" / "r.yaml"
    spec_file.write_text("dataset: beir:data/mine\nfirst_stage: {run: data/run.trec}\n")
    monkeypatch.chdir(tmp_path)
    # relative paths: against the working directory (issue 34, one rule for every spec); the
    # BEIR folder only the spec file's folder holds is still found there (with a warning)
    spec = load_rerank_spec(spec_file)
    assert spec.dataset == f"beir:{tmp_path / 'specs' / 'data' / 'mine'}"
    assert spec.first_stage_name == "run"
    assert spec.first_stage.run == str(tmp_path / "data" / "run.trec")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "my-text.yaml").write_text(f"kind: text\ncollection: beir:{tmp_path}/x\n")
    (manifests / "my-vec.yaml").write_text("kind: synthetic\nn: 10\n")
    monkeypatch.setenv("RWB_DATASETS_DIR", str(manifests))
    assert parse_rerank_spec({"dataset": "my-text"}, source="s.yaml").dataset == "my-text"
    with pytest.raises(ConfigError) as exc:
        parse_rerank_spec({"dataset": "my-vec"}, source="s.yaml")
    assert "field 'dataset'" in one_line(exc) and "has kind 'synthetic'" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        parse_rerank_spec({"dataset": "msmarco"}, source="s.yaml")
    assert "beir:<folder>" in one_line(exc) and "received 'msmarco'" in str(exc.value)
    with pytest.raises(ConfigError, match=r"field 'first_stage'"):
        parse_rerank_spec({"dataset": "scifact", "first_stage": {"file": "x"}}, source="s")


def test_rerank_missing_beir_file_and_unknown_queries_are_one_line(tmp_path, capsys):
    folder = _beir(tmp_path / "mine")
    (folder / "queries.jsonl").unlink()
    spec = tmp_path / "r.yaml"
    spec.write_text(f"dataset: beir:{folder}\n")
    # the data is not here: exit 3
    assert main(["tune", "rerank", str(spec), "--out", str(tmp_path / "run")]) == 3
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "file not found: queries.jsonl" in err and str(folder) in err
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "a"}))
    (folder / "qrels" / "test.tsv").write_text("q1\td0\t1\nq7\td1\t1\nq8\td1\t2\n")
    assert main(["tune", "rerank", str(spec), "--out", str(tmp_path / "run2")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "2 judged query ids are not in queries.jsonl" in err
    assert "'q7'" in err


def test_cache_spec_pairs_forms_and_errors(tmp_path, monkeypatch):
    from retrieval.cache.spec import load_cache_spec, parse_cache_spec

    monkeypatch.chdir(tmp_path)  # relative paths: against the working directory (issue 34)

    spec_file = tmp_path / "c.yaml"
    spec_file.write_text("pairs: {path: p.jsonl}\nheldout: {path: h.csv, label: same}\n"
                         "transfer: [{path: other.tsv}]\ndistractors_file: {path: d.txt}\n")
    spec = load_cache_spec(spec_file)
    assert spec.dataset == "pairs" and spec.data_name == "pairs:p.jsonl"
    assert spec.pairs.path == str(tmp_path / "p.jsonl")
    assert spec.heldout is not None and spec.heldout.path == str(tmp_path / "h.csv")
    assert spec.transfer[0].path == str(tmp_path / "other.tsv")
    assert parse_cache_spec({}).dataset == "gptcache_qqp"
    with pytest.raises(ConfigError) as exc:
        parse_cache_spec({"pairs": {"pth": "x"}}, source="c.yaml")
    msg = one_line(exc)
    assert "unknown parameter 'pth'" in msg and "path" in msg.split("allowed:")[1]
    with pytest.raises(ConfigError, match=r"field 'pairs.path' must be a labelled pairs file"):
        parse_cache_spec({"dataset": "pairs"}, source="c.yaml")
    with pytest.raises(ConfigError, match=r"field 'heldout' must be absent unless pairs.path"):
        parse_cache_spec({"heldout": {"path": "h.jsonl"}}, source="c.yaml")
    with pytest.raises(ConfigError, match=r"field 'pairs.format'"):
        parse_cache_spec({"pairs": {"path": "x", "format": "xlsx"}}, source="c.yaml")


def test_cache_tune_bad_pairs_file_is_one_line_before_any_redis(tmp_path, capsys):
    pairs = tmp_path / "p.csv"
    pairs.write_text("question1,question2,is_duplicate\nx,y,1\n")
    spec = tmp_path / "c.yaml"
    spec.write_text(f"pairs: {{path: {pairs}}}\n")
    assert main(["tune", "cache", str(spec), "--redis-url", "redis://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(pairs) in err and "field 'pairs.text_a'" in err
    assert "'question1'" in err


def test_study_spec_takes_the_same_forms(tmp_path, monkeypatch):
    import yaml

    monkeypatch.chdir(tmp_path)  # relative paths: against the working directory (issue 34)

    from retrieval.study.spec import load_study_spec

    data = yaml.safe_load((paths.REPO_ROOT / "sweeps" / "rag-end-to-end.yaml").read_text())
    data["retrieval"]["collection"] = "beir:data/mine"
    data["cache"]["pairs"] = {"path": "data/p.jsonl", "limit": None}
    spec_file = tmp_path / "study.yaml"
    spec_file.write_text(yaml.safe_dump(data))
    spec = load_study_spec(spec_file)
    assert spec.retrieval.collection == f"beir:{tmp_path / 'data' / 'mine'}"
    assert spec.cache.dataset == "pairs" and spec.cache.pairs.path == str(tmp_path / "data" /
                                                                          "p.jsonl")
    data["retrieval"]["collection"] = "msmarco"
    spec_file.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"field 'retrieval.collection' must be"):
        load_study_spec(spec_file)


# --------------------------------------------------------------------------- BM25 settings


def test_bm25_word_pattern_equals_rank_bm25_on_the_same_tokens():
    from rank_bm25 import BM25Okapi

    from retrieval.rerank.bm25 import BM25Index, BM25Params

    docs = ["A cat sat on a mat", "The dog ate a bone", "I think, therefore I am",
            "x y z and a b c", "Vitamin D and bone density in older adults", "cats and dogs"]
    queries = ["a cat", "I am", "vitamin d bone", "x"]
    params = BM25Params(token_pattern=r"\w+", stopwords="none", stemmer="none")
    idx = BM25Index(params).build(docs)
    ref = BM25Okapi([re.findall(r"\w+", d.lower()) for d in docs], k1=1.5, b=0.75,
                    epsilon=0.25)
    for q in queries:
        np.testing.assert_allclose(idx.scores(q), ref.get_scores(re.findall(r"\w+", q.lower())),
                                   rtol=1e-12)
    assert idx.tokenize(["I am a D"]) == [["i", "am", "a", "d"]]  # one-letter tokens kept
    default = BM25Index(BM25Params(stopwords="none", stemmer="none"))
    assert default.tokenize(["I am a D"]) == [["am"]]  # bm25s' default drops them
    conv = params.convention()
    assert conv["token_pattern"] == r"\w+" and conv["lowercase"] is True
    assert conv["stopwords"] == "none" and conv["stemmer"] == "none"
    cased = BM25Index(BM25Params(lowercase=False, stopwords=["the"], stemmer="none"))
    assert cased.tokenize(["The the Dog"]) == [["The", "Dog"]]


@pytest.mark.parametrize(("bm25", "fragment"), [
    ({"token_pattern": "("}, "field 'bm25.token_pattern'"),
    ({"token_pattern": r"\w*"}, "must not match the empty string"),
    ({"stemmer": "klingon"}, "field 'bm25.stemmer'"),
])
def test_bm25_bad_settings(bm25, fragment):
    from retrieval.rerank.spec import parse_rerank_spec

    with pytest.raises(ConfigError) as exc:
        parse_rerank_spec({"dataset": "scifact", "bm25": bm25}, source="s.yaml")
    assert fragment in one_line(exc)


# --------------------------------------------------------------------------- held-out file


def test_explicit_heldout_file_and_distractor_texts_in_the_design():
    from retrieval.cache.spec import parse_cache_spec
    from retrieval.cache.tune import design_probes, qqp_labels
    from retrieval.loaders.pairs import LabelledPair as P

    tuning = [P("t1", "t1b", 1), P("t2", "t2b", 0), P("t3", "t3b", 1)]
    held = [P("h1", "h1b", 1), P("h2", "t2b", 0)]  # t2b is probed in both files
    labels = qqp_labels(tuning + held, heldout=[False] * 3 + [True] * 2,
                        extra_texts=["extra one", "t1"], name="pairs:x")
    assert labels.extra_qids.tolist() == [len(labels.questions) - 1]  # "t1" is already a text
    spec = parse_cache_spec({"pairs": {"path": "x.jsonl"}, "heldout": {"path": "h.jsonl"}})
    d = design_probes(labels, spec)
    probes = [labels.questions[i] for i in d.probes]
    held_probes = {labels.questions[i] for i in d.probes[d.heldout]}
    assert sorted(probes) == ["h1b", "t1b", "t2b", "t3b"]
    assert held_probes == {"h1b", "t2b"} and d.info["n_probes_in_both_files"] == 1
    assert "extra one" in {labels.questions[i] for i in d.stored}
    assert d.info["n_distractor_texts"] == 1 and d.info["data"] == "pairs:x"
    plain = qqp_labels(tuning)
    assert plain.fingerprint != qqp_labels(tuning, extra_texts=["e"]).fingerprint


def test_unknown_judged_docs_are_counted_and_the_qrels_described(tmp_path):
    from retrieval.rerank.dataset import dataset_record, load_dataset, relevance_note

    folder = _beir(tmp_path / "mine")
    (folder / "qrels" / "test.tsv").write_text("q1\td0\t2\nq1\td1\t1\nq1\tgone\t1\n")
    coll = load_dataset(f"beir:{folder}", "test")
    rec = dataset_record(f"beir:{folder}", coll)
    assert rec["qrels_unknown_docs"] == 1 and rec["n_qrels"] == 3
    assert rec["path"] == str(folder.resolve()) and rec["split"] == "test"
    note = relevance_note(f"beir:{folder}", coll)
    assert "3 judgments over 1 queries (grade 1: 2, grade 2: 1)" in note and "graded" in note


def test_transfer_verdict_says_plainly_when_the_cap_does_not_hold():
    from retrieval.cache.transfer import verdict

    assert verdict("t.csv", 0.01, 0.03, 0.05, 900, "wilson", 0.95).startswith(
        "the cap holds on t.csv")
    no = verdict("t.csv", 0.08, 0.1, 0.05, 900, "wilson", 0.95)
    assert no.startswith("the cap does NOT hold on t.csv") and "0.1000 > cap 0.05" in no
    unsure = verdict("t.csv", 0.04, 0.07, 0.05, 90, "wilson", 0.95)
    assert unsure.startswith("the cap is NOT shown to hold") and "too few" in unsure


def test_verify_pairs_on_an_export_that_is_not_a_cache_export(tmp_path, capsys):
    doc = tmp_path / "rerank.yaml"
    doc.write_text("format: 1\nkind: rerank-depth\nengine: rerank\nrerank: {depth: 5}\n")
    pairs = write_pairs(ROWS, tmp_path / "p.jsonl")
    assert main(["verify", str(doc), "--pairs", str(pairs)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--pairs: only for a semantic-cache export" in err
    assert "'rerank-depth'" in err
