"""Filter inputs at the edges: label columns whose rows all hold the same number of labels,
corrupt attribute files, integer filter values outside int64, and the filter expressions
rendered for odd labels (Milvus string literals, Redis TAG escapes and refusals). The engines
themselves answer these in tests/filtering/test_filter_odd_labels.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from retrieval.cli import main
from retrieval.engines.milvus.filter import expression, string_literal
from retrieval.engines.redis.filter import check_filter, predicate, stored_tag
from retrieval.errors import ConfigError, DataError
from retrieval.filtering.attrs import Attributes, LabelColumn
from retrieval.filtering.spec import Where
from retrieval.loaders.attributes import read_attribute_file
from tests.helpers import write_vectors


def _npy_spec(folder: Path, attributes: str, filters: dict[str, object],
              backend: str = "faiss-flat") -> str:
    spec = {"name": "edges", "k": 5, "warmup": 0, "batch_repeats": 1,
            "dataset": {"kind": "npy", "base": str(folder / "base.npy"),
                        "queries": str(folder / "queries.npy"), "metric": "l2",
                        "attributes": str(folder / attributes)},
            "indexes": [{"backend": backend}], "filters": filters}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    return str(path)


# --- item 9: 2-d label columns -----------------------------------------------------------------
def test_label_lists_of_equal_length_are_label_columns(tmp_path: Path) -> None:
    """Rows that all hold one label (or all two) were refused as "must be 1-d; received shape
    (n, 1)"; each row is the list of its labels."""
    n = 30
    pd.DataFrame({"one": [[f"l{i % 3}"] for i in range(n)],
                  "two": [["a", f"b{i % 2}"] for i in range(n)],
                  "year": np.arange(n)}).to_parquet(tmp_path / "a.parquet")
    a = read_attribute_file(tmp_path / "a.parquet", n)
    assert a.describe() == {"one": "label", "two": "label", "year": "int"}
    assert a.labels["one"].row(4) == ["l1"] and a.labels["two"].row(3) == ["a", "b1"]
    assert int(a.labels["two"].mask_any(["b0"]).sum()) == 15
    rec = np.zeros(n, dtype=[("tags", "U4", (2,)), ("shard", "i8")])
    rec["tags"] = [["x", "y"] if i % 2 else ["x", "z"] for i in range(n)]
    np.save(tmp_path / "a.npy", rec)
    b = read_attribute_file(tmp_path / "a.npy", n)
    assert b.describe() == {"shard": "int", "tags": "label"}
    assert b.labels["tags"].row(1) == ["x", "y"] and b.labels["tags"].row(0) == ["x", "z"]
    c = Attributes.from_columns({"t": [["p"], ["q"]], "u": np.array([["p", "q"], ["q", "r"]])})
    assert c.labels["t"].row(1) == ["q"] and c.labels["u"].row(1) == ["q", "r"]
    with pytest.raises(DataError, match="must be 1-d"):  # 2-d integers stay refused
        Attributes.from_columns({"m": np.zeros((3, 2), dtype=np.int64)})


def test_filtered_eval_on_a_one_label_per_row_list_column(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    write_vectors(tmp_path, 60)
    pd.DataFrame({"topic": [[f"t{i % 4}"] for i in range(60)]}).to_parquet(
        tmp_path / "a.parquet")
    spec = _npy_spec(tmp_path, "a.parquet",
                     {"fixed": [{"name": "t1", "where": {"attr": "topic", "eq": "t1"}}]})
    assert main(["eval", spec, "--out", str(tmp_path / "run")]) == 0, capsys.readouterr().err
    assert (tmp_path / "run" / "summary.json").exists()


# --- item 11: corrupt attribute files, int64 ---------------------------------------------------
@pytest.mark.parametrize(("name", "content", "message"), [
    ("a.parquet", b"PAR1" + b"garbage" * 20, "not a readable parquet file"),
    ("a.npy", b"\x00garbage" * 20, "not a .npy file"),
    ("a.npy", b"\x93NUMPY\x01\x00", "not a readable .npy file"),
])
def test_corrupt_attribute_file_is_one_line_exit_2(tmp_path: Path, name: str, content: bytes,
                                                   message: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    write_vectors(tmp_path, 60)
    (tmp_path / name).write_bytes(content)
    spec = _npy_spec(tmp_path, name, {"fixed": [{"name": "f", "where": {"attr": "x", "eq": 1}}]})
    code = main(["eval", spec, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and message in err and name in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("where", [
    {"attr": "year", "in": [2**64]},
    {"attr": "year", "eq": -(2**63) - 1},
    {"attr": "year", "range": [0, 2**63]},
])
def test_integer_filter_values_outside_int64_are_one_line(tmp_path: Path,
                                                          where: dict[str, object],
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    write_vectors(tmp_path, 60)
    pd.DataFrame({"year": np.arange(60)}).to_parquet(tmp_path / "a.parquet")
    spec = _npy_spec(tmp_path, "a.parquet", {"fixed": [{"name": "big", "where": where}]})
    code = main(["eval", spec, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "out of int64 range" in err, err
    # the int64 ends themselves are accepted
    Where(attr="year", range=(-(2**63), 2**63 - 1))


# --- item 8: expressions for odd labels --------------------------------------------------------
def test_milvus_string_literals_keep_non_ascii_as_itself() -> None:
    """Milvus Lite's parser knows no \\u escape (JSON's ASCII escapes failed every non-ASCII
    label): non-ASCII is written as itself, only \\ " newline CR tab are escaped."""
    assert string_literal("日本") == '"日本"'
    assert string_literal('a"b\\c\nd\re\tf') == '"a\\"b\\\\c\\nd\\re\\tf"'
    assert string_literal("nb\u00a0sp\u200b") == '"nb\u00a0sp\u200b"'
    attrs = Attributes(2, {"y": np.arange(2)}, {"t": LabelColumn.from_rows(["ünï", "x"])})
    w = Where.model_validate({"attr": "t", "in": ["ünï", "it's"]})
    assert expression(w, attrs) == "ARRAY_CONTAINS_ANY(a_t, [\"ünï\", \"it's\"])"
    assert expression(Where(attr="y", range=(-(2**63), 5)), attrs) == (
        f"a_y >= {-(2**63)} and a_y <= 5")


def _labels(*vocab: str) -> Attributes:
    return Attributes(len(vocab), {}, {"t": LabelColumn.from_rows(list(vocab))})


def test_redis_tag_query_escapes_ascii_and_asks_for_the_trimmed_tag() -> None:
    attrs = _labels("_", " lead", "nb\u00a0sp", "日本", "a-b c")
    assert predicate(Where(attr="t", eq="_"), attrs) == r"@a_t:{\_}"
    assert predicate(Where(attr="t", eq=" lead"), attrs) == "@a_t:{lead}"
    assert predicate(Where(attr="t", eq="nb\u00a0sp"), attrs) == "@a_t:{nb\u00a0sp}"
    assert predicate(Where(attr="t", eq="日本"), attrs) == "@a_t:{日本}"
    assert predicate(Where(attr="t", eq="a-b c"), attrs) == r"@a_t:{a\-b\ c}"
    assert stored_tag("\t x \r\n") == "x" and stored_tag("cut\0here") == "cut"
    for label in ("_", " lead", "nb\u00a0sp", "日本"):
        check_filter(Where(attr="t", eq=label), attrs)


@pytest.mark.parametrize(("vocab", "label", "why"), [
    (("lead", " lead"), " lead", "same tag 'lead'"),
    (("lead", " lead"), "lead", "same tag 'lead'"),
    (("x\x01y", "z"), "x\x01y", "control character U+0001"),
    (("  ", "z"), "  ", "blank"),
    (("cut\0a", "cut"), "cut", "same tag 'cut'"),
])
def test_redis_refuses_a_label_it_cannot_filter_on(vocab: tuple[str, ...], label: str,
                                                   why: str) -> None:
    with pytest.raises(ConfigError) as e:
        check_filter(Where(attr="t", eq=label), _labels(*vocab))
    text = str(e.value)
    assert "\n" not in text.replace(repr(label), "") and why in text and "redis" in text, text
    assert repr(label) in text
