"""Error and warning wording: rwb's own words (never pydantic's or numpy's sentences), the file
named, each thing said once, and what the user gave taken as given (a BOM, a spec's limit)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import yaml

from retrieval.cli import main
from retrieval.errors import ConfigError, DataError


def _spec(tmp_path: Path, **over: object) -> Path:
    rng = np.random.default_rng(0)
    np.save(tmp_path / "v.npy", rng.random((50, 8), dtype=np.float32))
    np.save(tmp_path / "q.npy", rng.random((5, 8), dtype=np.float32))
    doc = {"name": "w", "dataset": {"kind": "npy", "base": str(tmp_path / "v.npy"),
                                    "queries": str(tmp_path / "q.npy"), "metric": "l2"},
           "k": 10, "warmup": 1, "batch_repeats": 1, "indexes": [{"backend": "hnswlib"}],
           **over}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("rwb: error: ") and "\n" not in err, err
    return err


def test_a_list_too_short_is_said_in_rwbs_words() -> None:
    from retrieval.bench.load.spec import parse_load_spec

    with pytest.raises(ConfigError) as exc:
        parse_load_spec({"dataset": "synthetic-small", "closed": {"clients": []},
                         "configs": [{"backend": "hnswlib"}]}, source="load.yaml")
    assert str(exc.value) == ("load.yaml: field 'closed.clients' must be a list of at least 1 "
                              "item; received []")


def test_a_validators_received_is_said_once() -> None:
    from retrieval.tune.spec import parse_spec

    with pytest.raises(ConfigError) as exc:
        parse_spec({"name": "x", "dataset": "synthetic-small", "indexes": [{"backend": "hnswlib"}],
                    "filters": {"selectivities": [0.0]}}, source="s.yaml")
    assert str(exc.value).count("received") == 1, exc.value
    assert str(exc.value).endswith("received 0.0")


def test_report_of_a_file_says_it_is_a_file(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = _spec(tmp_path)
    assert main(["report", str(path)]) == 2
    err = _one_line(capsys)
    assert f"'{path}' is a file, not a run directory" in err and "does not exist" not in err


@pytest.mark.parametrize(("over", "needle"), [
    ({"k": 100}, "field 'k' must be <= the number of base vectors (50); received 100"),
    ({"indexes": [{"backend": "faiss-ivf", "build": {"nlist": 100}}]},
     "field 'nlist' must be <= the number of vectors (50); received 100"),
])
def test_a_setting_that_does_not_fit_the_data_names_the_spec(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], over: dict, needle: str) -> None:
    if "k" in over:  # hnswlib's ef_search must be >= k: give it one that is
        over = {**over, "indexes": [{"backend": "hnswlib", "search": {"ef_search": 200}}]}
    path = _spec(tmp_path, **over)
    assert main(["eval", str(path), "--out", str(tmp_path / "run")]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"rwb: error: {path}: ") and needle in err, err


@pytest.mark.parametrize("content", [b"hello\n", b"", b"PK\x03\x04 a zip"])
def test_a_file_that_is_not_npy_says_so(tmp_path: Path, content: bytes) -> None:
    from retrieval.loaders.vectors import load_npy

    (tmp_path / "v.npy").write_bytes(content)
    np.save(tmp_path / "q.npy", np.zeros((2, 4), np.float32))
    with pytest.raises(DataError) as exc:
        load_npy(tmp_path / "v.npy", tmp_path / "q.npy", "l2")
    assert "not an .npy file" in str(exc.value) and "allow_pickle" not in str(exc.value)


def test_an_object_npy_is_refused_without_numpys_hint(tmp_path: Path) -> None:
    from retrieval.loaders.vectors import load_npy

    np.save(tmp_path / "v.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    np.save(tmp_path / "q.npy", np.zeros((2, 4), np.float32))
    with pytest.raises(DataError) as exc:
        load_npy(tmp_path / "v.npy", tmp_path / "q.npy", "l2")
    assert "holds Python objects" in str(exc.value) and "allow_pickle" not in str(exc.value)


def test_a_byte_order_mark_in_beir_jsonl_is_accepted(tmp_path: Path) -> None:
    from retrieval.loaders.beir import load_beir

    (tmp_path / "qrels").mkdir()
    docs = "\n".join(json.dumps({"_id": f"d{i}", "text": t}) for i, t in enumerate("abc"))
    (tmp_path / "corpus.jsonl").write_bytes(b"\xef\xbb\xbf" + docs.encode())
    (tmp_path / "queries.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(
        {"_id": "q1", "text": "a"}).encode())
    (tmp_path / "qrels" / "test.tsv").write_bytes(b"\xef\xbb\xbfquery-id\tcorpus-id\tscore\n"
                                                  b"q1\td0\t1\n")
    col = load_beir(tmp_path)
    assert list(col.corpus) == ["d0", "d1", "d2"] and list(col.queries) == ["q1"]
    assert col.qrels == {"q1": {"d0": 1}}


def test_a_cache_limit_from_the_spec_is_warned_once_and_named(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """faiss-ivf writes two entries (its trained centroids, its index), neither fits."""
    from retrieval.evaluation import Evaluator
    from retrieval.indexes.buildcache import ENV_MAX, CacheSettings
    from retrieval.loaders.synthetic import make_synthetic

    monkeypatch.setenv(ENV_MAX, "4096")
    monkeypatch.delenv("RWB_INDEX_CACHE", raising=False)
    ds = make_synthetic(400, 8, 5, seed=1)
    cache = CacheSettings(enabled=True, root=tmp_path / "cache", max_mb=1e-6)
    with caplog.at_level(logging.INFO, logger="retrieval.indexes.buildcache"), \
            Evaluator(ds, 5, index_cache=cache, warmup=0, batch_repeats=1) as ev:
        ev.build("faiss-ivf", {"nlist": 4})
    fits = [r for r in caplog.records if "does not fit" in r.getMessage()]
    assert len(fits) == 2, [r.getMessage() for r in caplog.records]
    assert [r.levelno for r in fits] == [logging.WARNING, logging.INFO]
    assert "the spec's index_build.cache_max_mb" in fits[0].getMessage()
    assert ENV_MAX not in fits[0].getMessage()
