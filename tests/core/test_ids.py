"""The caller's ids (retrieval.ids): checked once (distinct, int64 >= 0 or strings), mapped
to row positions and back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.errors import DataError
from retrieval.ids import CallerIds, as_ids, ids_or_rows, query_keys, read_id_file


def test_positions_and_back_for_int_and_string_ids() -> None:
    for raw in (np.array([70, 7, 700, 77], dtype=np.int64), np.array(["b", "a", "dd", "c"])):
        ids = CallerIds(as_ids(raw, "t"))
        pos = ids.positions(raw[[2, 0, 3]], "t")
        assert pos.tolist() == [2, 0, 3]
        assert ids.of(np.array([[2, 0, -1], [1, -1, -1]])) == [[raw[2], raw[0]], [raw[1]]]
        assert ids.lookup(np.array([raw[1], raw[1]]), "t").tolist() == [1, 1]
    assert ids_or_rows(None, np.array([[3, -1]])) == [[3]]
    assert query_keys(CallerIds(np.array(["q0", "q1"])), [1]) == ["q1"]


@pytest.mark.parametrize(("raw", "message"), [
    (np.array([1, 2, 1]), r"ids must be distinct; id 1 appears 2 times \(rows 0 and 2\)"),
    (np.array(["a", "a"]), r"id 'a' appears 2 times"),
    (np.array([3, -1]), r"integer ids must be >= 0 \(-1 marks 'no result'\); received -1"),
    (np.array([0.5, 1.5]), r"ids must be int64 integers or strings; received dtype float64"),
    (np.array(["a", ""]), r"string ids must not be empty"),
    (np.zeros((2, 2), dtype=np.int64), r"ids must be a 1-d array"),
])
def test_bad_ids_are_one_line(raw: np.ndarray, message: str) -> None:
    with pytest.raises(DataError, match=message):
        as_ids(raw, "t")


def test_unknown_ids_and_kinds_are_refused() -> None:
    ids = CallerIds(as_ids(np.array([10, 20]), "t"))
    with pytest.raises(DataError, match=r"t: id 30 is not one of the dataset's 2 ids"):
        ids.positions(np.array([10, 30]), "t")
    with pytest.raises(DataError, match="the dataset's ids are integers; received dtype <U2"):
        ids.positions(np.array(["10"]), "t")


def test_id_files(tmp_path: Path) -> None:
    np.save(tmp_path / "ok.npy", np.array(["x", "y"]))
    assert read_id_file(tmp_path / "ok.npy", 2, "ids").tolist() == ["x", "y"]
    with pytest.raises(DataError, match=r"2 ids for 3 vectors"):
        read_id_file(tmp_path / "ok.npy", 3, "ids")
    np.save(tmp_path / "obj.npy", np.array(["x", None], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="pickled Python objects"):
        read_id_file(tmp_path / "obj.npy", 2, "ids")
    with pytest.raises(DataError, match="id file not found"):
        read_id_file(tmp_path / "none.npy", 2, "ids")
