"""Datasets with the caller's ids (issue 29): an npy base with ``ids:`` (int64 ids that are not
row numbers, or strings) and ``attributes:`` keyed by an id column. Eval, a filtered target
sweep and a churn runbook run on them; every id saved in the run directory is one of the id
file's, and a filter on attribute values returns only ids whose attributes match, checked
against a numpy brute force here. Small data, in-process engines: seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from retrieval.churn.run import run_churn
from retrieval.churn.spec import parse_churn_spec
from retrieval.cli import main
from retrieval.errors import ConfigError, DataError
from retrieval.loaders.catalog import resolve_dataset
from retrieval.tune.runner import run_eval
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

pytest.importorskip("hnswlib")
pytest.importorskip("faiss")

N, NQ, DIM, K = 1200, 30, 16, 10
TENANTS = 6


def _write_dataset(folder: Path, kind: str) -> dict[str, Any]:
    """base/queries .npy, the id file (``int``: 10_000_000 + 7*i; ``str``: 'doc-...'), query
    ids and an attributes parquet keyed by ``id``, its rows shuffled (joined on the ids, not
    on row order). Returns the inline dataset spec."""
    rng = np.random.default_rng(7)
    centers = rng.normal(size=(8, DIM)) * 4
    base = (centers[rng.integers(0, 8, N)] + rng.normal(size=(N, DIM))).astype(np.float32)
    queries = (centers[rng.integers(0, 8, NQ)] + rng.normal(size=(NQ, DIM))).astype(np.float32)
    ids: np.ndarray = (10_000_000 + 7 * np.arange(N, dtype=np.int64) if kind == "int"
                       else np.array([f"doc-{i * 13 % 997}-{i}" for i in range(N)]))
    np.save(folder / "base.npy", base)
    np.save(folder / "queries.npy", queries)
    np.save(folder / "ids.npy", ids)
    np.save(folder / "qids.npy", np.array([f"q{i:03d}" for i in range(NQ)]))
    perm = rng.permutation(N)
    pd.DataFrame({"id": ids[perm], "tenant": rng.integers(0, TENANTS, N)[perm],
                  "color": [["red", "green", "blue"][i % 3] for i in perm]}
                 ).to_parquet(folder / "attrs.parquet")
    return {"kind": "npy", "base": str(folder / "base.npy"),
            "queries": str(folder / "queries.npy"), "metric": "l2",
            "ids": str(folder / "ids.npy"), "query_ids": str(folder / "qids.npy"),
            "attributes": str(folder / "attrs.parquet")}


@pytest.fixture(params=["int", "str"])
def dataset(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    return _write_dataset(tmp_path, request.param)


def _truth(data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, pd.DataFrame]:
    """(base, queries, ids) as written and the attributes by id, read back with numpy/pandas
    only (not through rwb)."""
    attrs = pd.read_parquet(data["attributes"]).set_index("id")
    return (np.load(data["base"]), np.load(data["queries"]), np.load(data["ids"]), attrs)


def _brute(base: np.ndarray, q: np.ndarray, ids: np.ndarray, ok: np.ndarray, k: int
           ) -> list[Any]:
    """The k nearest caller ids among the rows where ``ok`` (squared l2)."""
    d = ((base - q[None, :]) ** 2).sum(1)
    rows = np.flatnonzero(ok)
    return ids[rows[np.argsort(d[rows], kind="stable")[:k]]].tolist()


def _eval_spec(data: dict[str, Any], **kw: Any) -> Any:
    return parse_spec({"name": "ids", "dataset": data, "k": K, "warmup": 1,
                       "batch_repeats": 1, "target_recall": 0.9,
                       "indexes": [{"backend": "faiss-flat"},
                                   {"backend": "hnswlib", "build": {"M": 8,
                                                                    "ef_construction": 64},
                                    "search": {"ef_search": [16, 200]}}], **kw})


def test_the_dataset_joins_attributes_on_the_ids(dataset: dict[str, Any]) -> None:
    ds = resolve_dataset(dataset, where="test")
    _, _, ids, attrs = _truth(dataset)
    assert ds.base_ids is not None and ds.base_ids.ids.tolist() == ids.tolist()
    assert ds.attributes is not None
    # row r of the attributes is the row of id ids[r] in the (shuffled) parquet
    assert ds.attributes.ints["tenant"].tolist() == attrs.loc[ids, "tenant"].tolist()
    assert [ds.attributes.labels["color"].row(r) for r in range(5)] == \
        [[c] for c in attrs.loc[ids[:5], "color"]]


def test_eval_saves_caller_ids_and_filters_match_a_brute_force(
        dataset: dict[str, Any], tmp_path: Path) -> None:
    base, queries, ids, attrs = _truth(dataset)
    mine = ids[[3, 50, 51, 400, 777, 1000, 1199]].tolist()
    spec = _eval_spec(dataset, filters={
        "fixed": [{"name": "t2", "where": {"attr": "tenant", "eq": 2}},
                  {"name": "blue", "where": {"attr": "color", "in": ["blue"]}},
                  {"name": "mine", "where": {"attr": "id", "in": mine}}],
        "strategies": ["engine", "prefilter", "postfilter"]})
    run = run_eval(spec, tmp_path / "ev").run
    saved = pd.read_parquet(run.path / "ids.parquet")
    qids = np.load(dataset["query_ids"]).tolist()
    assert set(saved["query"]) == set(qids)  # the caller's query ids
    known = set(ids.tolist())
    everything = [i for row in saved["ids"] for i in row]
    assert everything and set(everything) <= known  # every saved id is a caller id
    want = {"t2": lambda i: attrs.loc[i, "tenant"] == 2,
            "blue": lambda i: attrs.loc[i, "color"] == "blue", "mine": lambda i: i in mine}
    for _, r in saved.iterrows():
        assert all(want[r["bucket"]](i) for i in r["ids"]), (r["bucket"], r["ids"])
    ok = {"t2": np.asarray(attrs.loc[ids, "tenant"] == 2),
          "blue": np.asarray(attrs.loc[ids, "color"] == "blue"), "mine": np.isin(ids, mine)}
    exact = saved[(saved["backend"] == "faiss-flat") & (saved["strategy"] == "engine")]
    assert len(exact) == 3 * NQ
    for _, r in exact.iterrows():
        q = qids.index(r["query"])
        assert list(r["ids"]) == _brute(base, queries[q], ids, ok[r["bucket"]], K)


def test_plain_eval_and_target_sweep_save_caller_ids(dataset: dict[str, Any],
                                                     tmp_path: Path) -> None:
    base, queries, ids, _ = _truth(dataset)
    qids = np.load(dataset["query_ids"]).tolist()
    ev = run_eval(_eval_spec(dataset), tmp_path / "ev").run
    saved = pd.read_parquet(ev.path / "ids.parquet")
    flat = saved[saved["backend"] == "faiss-flat"]
    assert len(flat) == NQ
    for _, r in flat.iterrows():
        assert list(r["ids"]) == _brute(base, queries[qids.index(r["query"])], ids,
                                        np.ones(N, dtype=bool), K)
    sw = run_sweep(_eval_spec(dataset, tune={"strategy": "target"},
                              filters={"selectivities": [0.2, 0.5], "attribute": "tenant",
                                       "strategies": ["engine", "postfilter"]}),
                   tmp_path / "sw").run
    chosen = pd.read_parquet(sw.path / "ids.parquet")
    assert set(chosen["query_set"]) == {"tune", "heldout"}
    assert set(chosen["bucket"]) == {"sel=0.2", "sel=0.5"}
    assert {len(g) for _, g in chosen.groupby(["label", "strategy", "bucket"])} == {NQ}
    assert set(i for row in chosen["ids"] for i in row) <= set(ids.tolist())


CHURN_STEPS: list[dict[str, Any]] = [
    {"insert": {"start": 0, "end": 700}}, {"search": {}},
    {"replace": {"start": 700, "end": 800, "old_start": 0, "old_end": 100}},
    {"delete": {"start": 100, "end": 300}}, {"insert": {"start": 800, "end": 1100}},
    {"search": {"control": True}},
]


def _churn(data: dict[str, Any], **runbook: Any) -> Any:
    return parse_churn_spec({
        "name": "ids", "dataset": data, "k": K, "queries": NQ, "warmup": 1, "write_batch": 128,
        "confidence": {"method": "binomial"}, "retune": False, "probe_maintain": False,
        "configs": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 64},
                     "search": {"ef_search": 64}}, {"backend": "faiss-flat", "label": "flat"}],
        "runbook": {"steps": CHURN_STEPS, **runbook}}, source="<test>")


def test_a_churn_runbook_runs_on_the_same_ids(dataset: dict[str, Any], tmp_path: Path) -> None:
    base, queries, ids, _ = _truth(dataset)
    run = run_churn(_churn(dataset), out=tmp_path / "c").run
    rows = pd.read_parquet(run.path / "rows.parquet")
    assert rows["id"].tolist() == ids.tolist()  # row r enters under the dataset's id
    saved = pd.read_parquet(run.path / "ids.parquet")
    assert set(i for row in saved["ids"] for i in row) <= set(ids.tolist())
    # the exact engine at the last search: the live set is rows 100..700 minus 100..300 (the
    # replaced ids hold rows 700..800 now) and 800..1100; its ids are the first rows' ids
    live = np.zeros(N, dtype=bool)
    live[300:700] = live[700:800] = live[800:1100] = True
    holder = ids.copy()
    holder[700:800] = ids[0:100]  # a replace keeps the id: rows 700..800 answer as ids[0:100]
    last = saved[(saved["backend"] == "flat") & (saved["step"] == 5)]
    qids = np.load(dataset["query_ids"]).tolist()
    for _, r in last.iterrows():
        assert list(r["ids"]) == _brute(base, queries[qids.index(r["query"])], holder, live, K)


def test_a_runbook_id_map_is_refused_beside_the_dataset_ids(tmp_path: Path) -> None:
    data = _write_dataset(tmp_path, "int")
    with pytest.raises(ConfigError, match=r"runbook\.ids' must be left out"):
        run_churn(_churn(data, ids={"offset": 5}), out=tmp_path / "c")


def test_duplicate_and_missing_ids_are_one_line_exit_2(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    data = _write_dataset(tmp_path, "int")
    ids = np.load(data["ids"])
    ids[5] = ids[9]
    np.save(tmp_path / "dup.npy", ids)
    with pytest.raises(DataError, match=r"ids must be distinct; id 10000063 appears 2 times "
                                        r"\(rows 5 and 9\)"):
        resolve_dataset({**data, "ids": str(tmp_path / "dup.npy")}, where="test")
    attrs = pd.read_parquet(data["attributes"])
    attrs.iloc[1:].to_parquet(tmp_path / "short.parquet")
    spec = tmp_path / "s.yaml"
    import yaml

    spec.write_text(yaml.safe_dump({"name": "x", "k": K, "indexes": [{"backend": "faiss-flat"}],
                                    "dataset": {**data,
                                                "attributes": str(tmp_path / "short.parquet")}}))
    assert main(["eval", str(spec), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any(f"no attribute row for id {attrs['id'].iloc[0]}" in line for line in err), err
    with pytest.raises(DataError, match="is not one of the dataset's"):
        np.save(tmp_path / "gt.npy", np.full((NQ, 3), 5, dtype=np.int64))  # a row number
        resolve_dataset({**data, "groundtruth": str(tmp_path / "gt.npy")}, where="test")


def test_in_memory_arrays_take_the_caller_ids(tmp_path: Path) -> None:
    from retrieval.data import VectorDataset

    data = _write_dataset(tmp_path, "str")
    base, queries, ids, _ = _truth(data)
    ds = VectorDataset.from_arrays(base, queries, "l2", ids=ids, query_ids=np.arange(NQ) + 500)
    run = run_eval(_eval_spec(data), tmp_path / "ev", dataset=ds).run
    saved = pd.read_parquet(run.path / "ids.parquet")
    flat = saved[saved["backend"] == "faiss-flat"]
    assert sorted(flat["query"]) == list(range(500, 500 + NQ))
    for _, r in flat.iterrows():
        assert list(r["ids"]) == _brute(base, queries[r["query"] - 500], ids,
                                        np.ones(N, dtype=bool), K)
    with pytest.raises(DataError, match=r"dataset 'arrays' ids: ids must be distinct"):
        VectorDataset.from_arrays(base, queries, "l2", ids=np.zeros(N, dtype=np.int64))


def test_an_hdf5_file_with_id_datasets(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    data = _write_dataset(tmp_path, "str")
    base, queries, ids, attrs = _truth(data)
    d = ((queries[:, None, :] - base[None, :, :]) ** 2).sum(-1)
    near = np.argsort(d, axis=1, kind="stable")[:, :K]
    with h5py.File(tmp_path / "d.hdf5", "w") as fh:
        fh.attrs["distance"] = "euclidean"
        fh["train"], fh["test"] = base, queries
        fh["train_ids"] = np.array([s.encode() for s in ids])  # bytes, as h5py stores text
        fh["neighbors"] = np.array([s.encode() for s in ids[near].ravel()]).reshape(near.shape)
    spec = {"kind": "hdf5", "path": str(tmp_path / "d.hdf5"), "ids": "train_ids",
            "attributes": data["attributes"]}
    ds = resolve_dataset(spec, where="test")
    assert ds.gt_ids is not None and ds.gt_ids.tolist() == near.tolist()  # mapped to rows
    assert ds.attributes is not None
    assert ds.attributes.ints["tenant"].tolist() == attrs.loc[ids, "tenant"].tolist()
    run = run_eval(_eval_spec(spec, indexes=[{"backend": "faiss-flat"}]), tmp_path / "ev").run
    saved = pd.read_parquet(run.path / "ids.parquet")
    assert [list(r) for r in saved.sort_values("query")["ids"]] == ids[near].tolist()
    with pytest.raises(DataError, match="no dataset 'nope'"):
        resolve_dataset({**spec, "ids": "nope"}, where="test")


def test_a_resumed_sweep_keeps_the_ids_of_units_decided_before(tmp_path: Path) -> None:
    data = _write_dataset(tmp_path, "int")
    ids = np.load(data["ids"])
    spec = _eval_spec(data, tune={"strategy": "target"})
    out = tmp_path / "sw"
    run_sweep(spec, out)
    first = pd.read_parquet(out / "ids.parquet")
    assert set(first["label"]) == {"faiss-flat", "hnswlib"} and len(first) == 2 * NQ
    assert set(i for row in first["ids"] for i in row) <= set(ids.tolist())
    (out / "ids.parquet").unlink()  # as if killed before the end: the log has the units
    res = run_sweep(spec, out)  # resumed: every unit decided already, none measured again
    assert res.points_measured == 0
    again = pd.read_parquet(out / "ids.parquet")
    key = ["label", "query"]
    assert again.sort_values(key)["ids"].map(list).tolist() == \
        first.sort_values(key)["ids"].map(list).tolist()
