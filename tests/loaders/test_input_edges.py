"""Inputs that ended in a traceback: a pairs CSV with CR-only line endings (now read as
written), a CSV the csv module refuses (one line), and ``retrieval.sweep`` given a
``target_recall`` / ``n_trials`` of the wrong type (one ConfigError, nothing run)."""

from __future__ import annotations

from pathlib import Path

import pytest

import retrieval
from retrieval.errors import ConfigError, DataError
from retrieval.loaders.pairs import read_pairs, read_texts

SPEC = """name: tiny
dataset: {kind: synthetic, n: 300, dim: 8, n_queries: 10}
k: 5
indexes: [{backend: faiss-flat}]
"""


@pytest.mark.parametrize(("name", "raw"), [
    ("cr.csv", b'a,b,duplicate\r"two\rlines",hi there,1\rfoo,bar,0\r'),
    ("cr.tsv", b"a\tb\tduplicate\rtwo\rx\ty\t1\r"),
    ("crlf.csv", b'a,b,duplicate\r\n"two\r\nlines",hi there,1\r\nfoo,bar,0\r\n'),
])
def test_pairs_with_cr_only_line_endings_are_read(tmp_path: Path, name: str, raw: bytes
                                                  ) -> None:
    path = tmp_path / name
    path.write_bytes(raw)
    if name == "cr.tsv":
        with pytest.raises(DataError) as e:  # the row "two" lacks two fields: named by line
            read_pairs(path)
        assert f"{path}:2:" in str(e.value) and "\n" not in str(e.value)
        return
    pairs = read_pairs(path)
    sep = "\r\n" if name.startswith("crlf") else "\r"
    assert [(p.text_a, p.text_b, p.label) for p in pairs] == [
        (f"two{sep}lines", "hi there", 1), ("foo", "bar", 0)]
    texts = tmp_path / "t.csv"
    texts.write_bytes(b"text\rone\rtwo\r")
    assert read_texts(texts, column="text") == ["one", "two"]


def test_a_csv_the_csv_module_refuses_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("a,b,duplicate\nx," + "y" * 200_000 + ",1\n")  # over csv's field limit
    with pytest.raises(DataError) as e:
        read_pairs(path)
    text = str(e.value)
    assert "\n" not in text and str(path) in text and "not valid CSV" in text, text


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"target_recall": "high"}, "field '--target-recall' must be in (0, 1]; received "
                                "'high'"),
    ({"target_recall": True}, "received True"),
    ({"target_recall": float("nan")}, "received nan"),
    ({"n_trials": "5"}, "field '--n-trials' must be an integer >= 1; received '5'"),
    ({"strategy": 5}, "unknown strategy '5'"),
])
def test_sweep_api_arguments_of_the_wrong_type_are_one_error(
        tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    with pytest.raises(ConfigError) as e:
        retrieval.sweep(str(spec), out=tmp_path / "run", **kwargs)  # type: ignore[arg-type]
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert not (tmp_path / "run").exists()


def test_loading_scifact_leaves_the_csv_field_limit_as_it_was(tmp_path: Path) -> None:
    """SciFact's reader raises csv's (process-wide) field limit for its own read only: a
    pairs file read after it still gets its one-line error."""
    import csv

    from retrieval.errors import RwbError
    from retrieval.loaders.shared import load_scifact

    before = csv.field_size_limit()
    try:
        load_scifact()
    except RwbError as exc:
        pytest.skip(f"SciFact not available here: {exc}")
    assert csv.field_size_limit() == before
    test_a_csv_the_csv_module_refuses_is_one_line(tmp_path)
