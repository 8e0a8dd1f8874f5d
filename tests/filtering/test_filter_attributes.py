"""Attributes from the forms users have: a parquet / structured npy column file beside .npy
vectors, BEIR corpus metadata; and the CLI's one-line errors for bad filter input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from retrieval.cli import main
from retrieval.errors import ConfigError, DataError
from retrieval.loaders.attributes import beir_attributes, read_attribute_file
from retrieval.loaders.catalog import resolve_dataset
from tests.helpers import write_vectors


def test_parquet_and_npy_attribute_files(tmp_path: Path) -> None:
    write_vectors(tmp_path, 50)
    pd.DataFrame({"year": np.arange(50) % 7, "lang": ["en", "de"] * 25,
                  "tags": [["a", "b"] if i % 3 else [] for i in range(50)]}
                 ).to_parquet(tmp_path / "attrs.parquet")
    ds = resolve_dataset({"kind": "npy", "base": "base.npy", "queries": "queries.npy",
                          "metric": "l2", "attributes": "attrs.parquet"}, base_dir=tmp_path)
    a = ds.attributes
    assert a is not None and a.describe() == {"lang": "label", "tags": "label", "year": "int"}
    assert a.ints["year"].tolist() == (np.arange(50) % 7).tolist()
    assert a.labels["tags"].row(1) == ["a", "b"] and a.labels["tags"].row(0) == []
    rec = np.zeros(50, dtype=[("shard", "i4"), ("kind", "U3")])
    rec["shard"], rec["kind"] = np.arange(50) // 10, ["x", "yy"] * 25
    np.save(tmp_path / "attrs.npy", rec)
    b = read_attribute_file(tmp_path / "attrs.npy", 50)
    assert b.ints["shard"].max() == 4 and b.labels["kind"].mask_any(["yy"]).sum() == 25


def test_attribute_file_errors(tmp_path: Path) -> None:
    np.save(tmp_path / "plain.npy", np.arange(50))
    with pytest.raises(DataError, match="must be a structured array"):
        read_attribute_file(tmp_path / "plain.npy", 50)
    pd.DataFrame({"year": np.arange(49)}).to_parquet(tmp_path / "short.parquet")
    with pytest.raises(DataError, match="49 attribute rows for 50 base vectors"):
        read_attribute_file(tmp_path / "short.parquet", 50)
    with pytest.raises(ConfigError, match=r"a \.parquet or \.npy file"):
        read_attribute_file(_touch(tmp_path / "a.csv"), 50)


def _touch(p: Path) -> Path:
    p.write_text("x")
    return p


def test_beir_metadata_fields(tmp_path: Path) -> None:
    docs = [{"_id": "d1", "text": "a", "metadata": {"year": 2001, "venue": "x"}},
            {"_id": "d2", "text": "b", "metadata": {"year": 2003, "venue": ["y", "z"]}},
            {"_id": "d3", "text": "c"}]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    a = beir_attributes(tmp_path, ["d3", "d1", "d2"], ["year", "venue"])
    assert a.ints["year"].tolist() == [-1, 2001, 2003]
    assert [a.labels["venue"].row(i) for i in range(3)] == [[], ["x"], ["y", "z"]]
    with pytest.raises(DataError, match="no document has metadata field 'lang'"):
        beir_attributes(tmp_path, ["d1"], ["lang"])


def _spec(tmp_path: Path, filters: dict[str, object]) -> str:
    spec = {"name": "bad", "dataset": {"kind": "synthetic", "n": 300, "dim": 8,
                                       "n_queries": 5, "attributes": True},
            "indexes": [{"backend": "faiss-flat"}], "filters": filters}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@pytest.mark.parametrize(("filters", "message"), [
    ({"fixed": [{"name": "f", "where": {"attr": "colour", "eq": "x"}}]},
     "unknown attribute 'colour'; allowed: cluster, clustered, tag, uniform"),
    ({"fixed": [{"name": "f", "where": {"attr": "tag", "range": [1, 2]}}]},
     "field 'tag.range' must be eq or in"),
    ({"fixed": [{"name": "f", "where": {"attr": "uniform", "range": [-5, -1]}}]},
     "matches no base vector"),
    ({"selectivities": [1.5], "attribute": "uniform"}, "selectivity must be in (0, 1)"),
])
def test_cli_bad_filter_input_is_one_line_exit_2(tmp_path: Path, filters: dict[str, object],
                                                 message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", _spec(tmp_path, filters), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err, err


def test_cli_engine_strategy_on_a_backend_without_filtering(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    from retrieval.testing import fake  # noqa: F401  (registers "fake")

    path = _spec(tmp_path, {"selectivities": [0.1], "attribute": "uniform"})
    data = yaml.safe_load(Path(path).read_text())
    data["indexes"] = [{"backend": "fake"}]
    Path(path).write_text(yaml.safe_dump(data))
    assert main(["eval", path, "--out", str(tmp_path / "run")]) == 2
    assert "'fake' has no in-engine filtering" in capsys.readouterr().err


def test_pareto_refuses_a_filtered_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    run = tmp_path / "run"
    assert main(["eval", _spec(tmp_path, {"selectivities": [0.1], "attribute": "uniform",
                                          "strategies": ["engine"]}), "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["pareto", str(run)]) == 2
    assert "one trade-off per selectivity bucket" in capsys.readouterr().err


def test_the_declared_workload_decides_not_a_key(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A filtered run's summary declares ``workload: filtered``; rwb pareto reads the
    declaration (a summary without its ``filters`` block is still a filtered run), and a
    summary written before the field existed is known by its ``filters`` block."""
    from retrieval.runs import WORKLOAD_FILTERED, WORKLOAD_PLAIN, workload_kind

    run = tmp_path / "run"
    assert main(["eval", _spec(tmp_path, {"selectivities": [0.1], "attribute": "uniform",
                                          "strategies": ["engine"]}), "--out", str(run)]) == 0
    capsys.readouterr()
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    assert summary["workload"] == WORKLOAD_FILTERED
    path.write_text(json.dumps({k: v for k, v in summary.items() if k != "filters"}))
    assert main(["pareto", str(run)]) == 2
    assert "one trade-off per selectivity bucket" in capsys.readouterr().err
    assert workload_kind({"filters": {}}) == WORKLOAD_FILTERED  # an older filtered summary
    assert workload_kind({"rows": []}) == WORKLOAD_PLAIN
    assert workload_kind({"workload": "plain", "filters": {}}) == WORKLOAD_PLAIN


@pytest.mark.parametrize(("dataset", "message"), [
    ({"kind": "text", "collection": "scifact", "attributes": ["year"]},
     "empty for collection 'scifact'"),
    ({"kind": "text", "collection": "reuters", "n_queries": 10, "attributes": ["people"]},
     "a subset of topics, places for reuters"),
])
def test_text_attribute_fields_checked_before_embedding(dataset: dict[str, object],
                                                         message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_dataset(dataset)


def test_filtered_ground_truth_is_cached_by_data_and_filter(tmp_path: Path) -> None:
    from retrieval.filtering import FilterSpec
    from retrieval.loaders.synthetic import make_synthetic
    from retrieval.workload import bind_workload, filtered_ground_truth

    ds = make_synthetic(800, 8, 20, attributes=True)
    b1, b2 = bind_workload(FilterSpec(selectivities=[0.05, 0.2], attribute="uniform"),
                           ds.attributes, ds.n_queries, seed=0)
    g1 = filtered_ground_truth(ds.base, ds.queries, ds.metric, b1, 10,
                               fingerprint=ds.fingerprint, cache=tmp_path)
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1 and b1.digest in files[0].name
    again = filtered_ground_truth(ds.base, ds.queries, ds.metric, b1, 10,
                                  fingerprint=ds.fingerprint, cache=tmp_path)
    assert np.array_equal(g1.ids, again.ids)
    filtered_ground_truth(ds.base, ds.queries, ds.metric, b2, 10, fingerprint=ds.fingerprint,
                          cache=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 2  # another filter: another entry


@pytest.mark.slow
@pytest.mark.model
def test_beir_metadata_through_the_catalog(tmp_path: Path) -> None:
    """A BEIR folder's corpus metadata becomes the dataset's attributes (MiniLM vectors)."""
    folder = tmp_path / "toy"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "", "text": f"document number {i} about topic {i % 3}",
             "metadata": {"year": 2000 + i % 4, "topic": f"t{i % 3}"}} for i in range(12)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "topic 1"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    ds = resolve_dataset({"kind": "text", "collection": f"beir:{folder}",
                          "attributes": ["year", "topic"]})
    a = ds.attributes
    assert a is not None and a.n == ds.n_base == 12
    assert sorted(set(a.ints["year"].tolist())) == [2000, 2001, 2002, 2003]
    assert a.labels["topic"].mask_any(["t1"]).sum() == 4


@pytest.mark.parametrize(("extra", "message"), [
    (["--strategy", "grid"], "must be target for a spec with 'filters'"),
])
def test_filtered_sweep_bad_options(tmp_path: Path, extra: list[str], message: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = _spec(tmp_path, {"selectivities": [0.1], "attribute": "uniform"})
    args = ["sweep", path, "--target-recall", "0.9", "--out", str(tmp_path / "run"), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
