"""Your own reranker: a Python callable through ``retrieval.tune_rerank(reranker=...)`` and an
HTTP ``rerank`` endpoint (Cohere / Jina / TEI shape, a local server started here), both through
``tune rerank`` end to end with export and verify; rerankers and embedders by entry point."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import retrieval
from retrieval.errors import BackendError, ConfigError
from retrieval.rerank.custom import CallableReranker, HttpReranker, callable_path
from retrieval.testing.rerank_server import RerankServer, overlap_scores

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

TOPICS = ["granite quarry stone", "violin orchestra music", "tomato garden soil",
          "comet orbit telescope", "bicycle chain gear", "salmon river fishing",
          "glacier ice climate", "volcano lava eruption"]


@pytest.fixture(scope="module")
def beir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny synthetic BEIR folder: 8 topics x 4 documents, one query per topic (the spec
    sweeps depths 2 and 5 only, so the reranker is always used)."""
    folder = tmp_path_factory.mktemp("beir") / "tiny"
    (folder / "qrels").mkdir(parents=True)
    rng = np.random.default_rng(0)
    filler = ["the", "a", "of", "and", "report", "notes", "general", "page", "section"]
    docs, qrels = [], []
    for t, topic in enumerate(TOPICS):
        for j in range(4):
            words = topic.split()[: 3 - (j % 3)] + list(rng.choice(filler, 6))
            docs.append({"_id": f"d{t}-{j}", "title": "", "text": " ".join(words)})
            if j < 2:
                qrels.append(f"q{t}\td{t}-{j}\t1")
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{t}", "text": f"about {topic}"}) + "\n"
        for t, topic in enumerate(TOPICS)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                               + "\n".join(qrels) + "\n")
    return folder


def _spec(beir: Path, **reranker: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "own-rerank", "dataset": f"beir:{beir}", "depths": [2, 5],
                           "recall_k": 10, "latency": {"sample_queries": 2, "warmup": 0},
                           "router": {"quantiles": 2}}
    if reranker:
        out["reranker"] = reranker
    return out


# --------------------------------------------------------------------------- HTTP client


@pytest.mark.parametrize("shape", ["cohere", "tei"])
def test_http_reranker_speaks_both_shapes(shape: str) -> None:
    passages = ["granite stone", "violin", "granite quarry stone walls"]
    with RerankServer() as srv:
        rr = HttpReranker(srv.url, shape=shape, model="my-model")
        got = rr.score("granite quarry stone", passages)
        body = srv.requests[0]
    assert got.tolist() == pytest.approx(overlap_scores("granite quarry stone", passages))
    if shape == "tei":
        assert body["texts"] == passages and "documents" not in body
    else:
        assert body["documents"] == passages and body["top_n"] == 3
        assert body["model"] == "my-model"


def test_http_reranker_retries_and_bounds_concurrency() -> None:
    passages = [f"stone {i}" for i in range(8)]
    with RerankServer(fail_first=2, delay_s=0.05) as srv:
        rr = HttpReranker(srv.url, retries=3, backoff_s=0.01, concurrency=2, max_documents=2)
        got = rr.score("stone", passages)
    assert got.tolist() == [1.0] * 8
    assert rr.requests == 4 + 2  # four chunks, two answered 503 first
    assert 1 <= srv.max_in_flight <= 2


def test_http_reranker_errors_are_one_line_without_the_key(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("MY_RERANK_KEY", "right-key-123")
    with RerankServer(token="other-key-456") as srv:
        rr = HttpReranker(srv.url, key_env="MY_RERANK_KEY", retries=0)
        with pytest.raises(BackendError) as err:
            rr.score("q", ["p"])
    assert "HTTP 401" in str(err.value) and "right-key-123" not in str(err.value)
    with RerankServer(fail_first=10) as srv:
        rr = HttpReranker(srv.url, retries=1, backoff_s=0.01)
        with pytest.raises(BackendError, match="HTTP 503 after 2 attempts"):
            rr.score("q", ["p"])
    with pytest.raises(ConfigError, match="MISSING_KEY_ENV is not set"):
        HttpReranker("http://127.0.0.1:9/rerank", key_env="MISSING_KEY_ENV")
    with pytest.raises(ConfigError, match="credentials were redacted"):
        HttpReranker("http://user:***@127.0.0.1:9/rerank")


def test_http_reranker_timeout_is_a_deadline_per_request() -> None:
    """Issue 34 MEDIUM 6: an endpoint trickling one byte every 0.2 s never stalls a socket read
    for ``timeout_s``; the request is still timed out at ``timeout_s`` (a deadline)."""
    with RerankServer(trickle_s=0.2) as srv:
        rr = HttpReranker(srv.url, retries=0, timeout_s=1.0)
        with pytest.raises(BackendError, match=r"timed out|within 1.0 s"):
            rr.score("granite", ["granite stone", "violin"])
        # the answer is ~90 bytes (~18 s at this pace): given up before its end
        assert srv.completed == 0 and len(srv.requests) == 1


@pytest.mark.parametrize(("answer", "words"), [
    ({"results": [{"index": 0, "relevance_score": float("nan")},
                  {"index": 1, "relevance_score": 0.5}]}, "expected a finite number"),
    ({"results": [{"index": 0, "relevance_score": 0.1},
                  {"index": 0, "relevance_score": 0.5}]}, "scored twice"),
    ({"results": [{"index": -1, "relevance_score": 0.1},
                  {"index": 1, "relevance_score": 0.5}]}, "an index in [0, 2)"),
])
def test_http_reranker_answers_are_read_strictly(answer: dict[str, Any], words: str) -> None:
    """Issue 34 LOW: NaN scores, duplicate and negative indices were accepted."""
    rr = HttpReranker("http://127.0.0.1:9/rerank", retries=0)
    with pytest.raises(BackendError) as err:
        rr._parse(answer, 2)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_callable_path_names_importable_functions_only() -> None:
    assert callable_path(overlap_scores) == "retrieval.testing.rerank_server:overlap_scores"
    assert callable_path(lambda q, p: [0.0] * len(p)) is None
    with pytest.raises(ConfigError, match="expected a callable"):
        CallableReranker(42)


# --------------------------------------------------------------------------- end to end


@pytest.mark.model
@pytest.mark.slow  # loads the packaged MiniLM for the dense first stage
def test_callable_reranker_tunes_exports_and_verifies(beir: Path, tmp_path: Path) -> None:
    run = retrieval.tune_rerank(_spec(beir), reranker=overlap_scores, out=tmp_path / "run")
    assert run.summary.reranker.kind == "callable"
    assert run.summary.chosen_depth in (2, 5)
    exported = retrieval.export(run, "rerank", tmp_path / "rerank.yaml")
    doc = yaml.safe_load(exported.path.read_text())
    assert doc["reranker"]["callable"] == "retrieval.testing.rerank_server:overlap_scores"
    assert retrieval.verify(exported).holds

    def local(q: str, ps: list[str]) -> list[float]:  # no import path
        return overlap_scores(q, ps)

    run2 = retrieval.tune_rerank(_spec(beir), reranker=local, out=tmp_path / "run2")
    exp2 = retrieval.export(run2, "rerank", tmp_path / "rerank2.yaml")
    with pytest.raises(ConfigError, match="reranker=fn"):
            retrieval.verify(exp2)
    assert retrieval.verify(exp2, reranker=local).holds


@pytest.mark.model
@pytest.mark.slow  # loads the packaged MiniLM for the dense first stage
def test_a_rerank_export_verifies_on_a_moved_beir_folder(
        beir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34 new user 2: own-data exports are portable: the recorded BEIR folder gone (a CI
    runner), ``rwb verify FILE --dataset FOLDER`` or ``$RWB_DATA_DIR`` holding a folder of that
    name; the fingerprint decides it is the same collection."""
    import shutil

    from retrieval.cli import main

    mine = tmp_path / "here" / "tiny"
    shutil.copytree(beir, mine)
    run = retrieval.tune_rerank(_spec(mine), reranker=overlap_scores, out=tmp_path / "run")
    exported = retrieval.export(run, "rerank", tmp_path / "rerank.yaml")
    moved = tmp_path / "runner" / "tiny"
    moved.parent.mkdir()
    mine.rename(moved)
    monkeypatch.delenv("RWB_DATA_DIR", raising=False)
    assert main(["verify", str(exported.path)]) == 3  # the data is not here
    assert "not measurable here" in capsys.readouterr().err
    assert main(["verify", str(exported.path), "--dataset", str(moved)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("RWB_DATA_DIR", str(moved.parent))
    assert main(["verify", str(exported.path)]) == 0
    capsys.readouterr()
    other = tmp_path / "other" / "tiny"
    shutil.copytree(moved, other)
    (other / "queries.jsonl").write_text((other / "queries.jsonl").read_text()
                                         .replace("about", "on"))
    assert main(["verify", str(exported.path), "--dataset", str(other)]) == 2
    assert "fingerprint" in capsys.readouterr().err


@pytest.mark.model
@pytest.mark.slow  # loads the packaged MiniLM for the dense first stage
def test_the_key_rwb_sends_is_masked_whatever_its_variable(
        beir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34 HIGH 4: ``key_env: COHERE_KEY`` (no secret word in the name) and an endpoint
    whose 401 body echoes the header: the key is in no output (stderr, run files)."""
    from retrieval.cli import main

    monkeypatch.setenv("COHERE_KEY", "plain-cohere-value-31337")
    with RerankServer(token="another-one", echo_auth=True) as srv:
        rr = HttpReranker(srv.url, key_env="COHERE_KEY", retries=0)
        with pytest.raises(BackendError) as err:
            rr.score("q", ["p"])
        assert "HTTP 401" in str(err.value) and "invalid api token" in str(err.value)
        assert "plain-cohere-value-31337" not in str(err.value)
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(_spec(beir, kind="http", url=srv.url, shape="cohere",
                                             key_env="COHERE_KEY", retries=0)))
        code = main(["-v", "tune", "rerank", str(spec), "--out", str(tmp_path / "run")])
    out = capsys.readouterr()
    assert code != 0 and "HTTP 401" in out.err
    assert "plain-cohere-value-31337" not in out.out + out.err
    for f in (tmp_path / "run").rglob("*") if (tmp_path / "run").exists() else []:
        if f.is_file():
            assert b"plain-cohere-value-31337" not in f.read_bytes(), f


@pytest.mark.model
@pytest.mark.slow  # loads the packaged MiniLM for the dense first stage
def test_http_reranker_through_the_cli(beir: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval.cli import main

    monkeypatch.setenv("MY_RERANK_KEY", "sekrit-key-789")
    with RerankServer(token="sekrit-key-789", fail_first=1) as srv:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(_spec(beir, kind="http", url=srv.url, shape="tei",
                                             key_env="MY_RERANK_KEY", retries=2,
                                             max_documents=3)))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["tune", "rerank", str(spec), "--out", str(tmp_path / "run"),
                         "--json"]) == 0
        assert json.loads(buf.getvalue())["reranker"]["kind"] == "http"
        assert main(["export", str(tmp_path / "run"), "--engine", "rerank", "--out",
                     str(tmp_path / "rr.yaml")]) == 0
        text = (tmp_path / "rr.yaml").read_text()
        doc = yaml.safe_load(text)
        assert doc["reranker"]["url"] == srv.url and doc["reranker"]["shape"] == "tei"
        assert doc["reranker"]["key_env"] == "MY_RERANK_KEY" and "sekrit" not in text
        n = len(srv.requests)
        assert main(["verify", str(tmp_path / "rr.yaml")]) == 0
        assert len(srv.requests) > n  # verify re-scored through the endpoint


def test_url_credentials_are_redacted_from_the_export_block() -> None:
    from retrieval.exporting.rerank import _reranker_doc
    from retrieval.redact import scrub

    doc = scrub(_reranker_doc("http", "x", {"url": "https://me:pa55word@host/rerank",
                                            "shape": "cohere"}))
    assert "pa55word" not in json.dumps(doc) and doc["url"].startswith("https://")


# --------------------------------------------------------------------------- entry points


@pytest.fixture
def plugin_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution (a .dist-info folder on sys.path) with both entry points."""
    pkg = tmp_path / "my_rwb_plugin.py"
    pkg.write_text(
        "import numpy as np\n"
        "from retrieval.testing.rerank_server import overlap_scores\n"
        "def make_reranker(scale=1.0):\n"
        "    return lambda q, ps: [scale * s for s in overlap_scores(q, ps)]\n"
        "class Emb:\n"
        "    model_id = 'my-plugin-embedder'\n"
        "    dim = 4\n"
        "    def embed(self, texts, batch_size=32):\n"
        "        return np.ones((len(texts), 4), dtype=np.float32)\n"
        "def make_embedder():\n"
        "    return Emb()\n")
    info = tmp_path / "my_rwb_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-rwb-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[rwb.rerankers]\nmine = my_rwb_plugin:make_reranker\n\n"
        "[rwb.embedders]\nmine = my_rwb_plugin:make_embedder\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("my_rwb_plugin", None)


def test_rerankers_and_embedders_come_in_by_entry_point(plugin_dist: None) -> None:
    from retrieval.embed import get_embedder
    from retrieval.rerank.custom import make_custom_reranker
    from retrieval.rerank.spec import RerankerSpec

    rr, info = make_custom_reranker(RerankerSpec(kind="entry-point", name="mine",
                                                 options={"scale": 2.0}))
    assert info["name"] == "entry-point:mine"
    assert rr.score("granite stone", ["granite", "x"]).tolist() == [1.0, 0.0]
    with pytest.raises(ConfigError, match=r"'nope' is not in group rwb\.rerankers"):
        make_custom_reranker(RerankerSpec(kind="entry-point", name="nope"))
    emb = get_embedder("entry-point:mine")
    assert emb.model_id == "my-plugin-embedder" and emb.dim == 4
