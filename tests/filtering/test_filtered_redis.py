"""Redis filtered search (RediSearch hybrid queries) against a real Redis 8 with the search
module: the filter conformance check under both hybrid policies, TAG escaping, an AND of
predicates, a filtered `rwb eval` with the engine strategy, and the bad-input lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from retrieval.cli import main
from retrieval.engines.redis.filter import query_filter
from retrieval.errors import ConfigError, DataError
from retrieval.filtering.attrs import Attributes, LabelColumn
from retrieval.filtering.rows import bind, where_mask
from retrieval.filtering.spec import Where
from retrieval.indexes import create_index
from retrieval.testing.filter_conformance import check_filtering

pytestmark = [pytest.mark.slow, pytest.mark.redis]

HNSW = {"M": 16, "EF_CONSTRUCTION": 64}
#: labels full of TAG syntax (and two differing only in case: TAG fields are CASESENSITIVE)
ODD = ["a b", "x|y", "c,d", "{e}", "-neg", "@at", "Grain", "grain", "p.q:r", "naïve", "1*2"]


@pytest.fixture()
def redis_env(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("REDIS_URL", redis_url)
    return redis_url


@pytest.mark.parametrize("search", [
    {"EF_RUNTIME": 400, "HYBRID_POLICY": "BATCHES", "BATCH_SIZE": 16},
    {"EF_RUNTIME": 10, "HYBRID_POLICY": "ADHOC_BF"},
], ids=["batches", "adhoc-bf"])
def test_redis_filter_conformance(redis_env: str, search: dict) -> None:
    recalls = check_filtering("redis", HNSW, search)
    assert len(recalls) == 4
    if search["HYBRID_POLICY"] == "ADHOC_BF":  # brute force over the matches: exact at any ef
        assert all(r == 1.0 for r in recalls.values()), recalls


def test_redis_flat_filter_conformance(redis_env: str) -> None:
    recalls = check_filtering("redis", {"algorithm": "FLAT"}, {})
    assert all(r == 1.0 for r in recalls.values()), recalls


def test_hybrid_policy_reaches_the_query(redis_env: str) -> None:
    index = create_index("redis", 4, "l2", HNSW)
    try:
        index.set_search_params(EF_RUNTIME=20, HYBRID_POLICY="BATCHES", BATCH_SIZE=8)
        cmd = index._hybrid(5, "(@a_t:{x})")(np.zeros(4, dtype=np.float32))
        assert cmd[2] == ("(@a_t:{x})=>[KNN $K @v $BLOB EF_RUNTIME $EF HYBRID_POLICY BATCHES "
                          "BATCH_SIZE $BS AS d]")
        assert cmd[3:12] == ["PARAMS", 8, "K", 5, "EF", 20, "BS", 8, "BLOB"]
        index.set_search_params(HYBRID_POLICY="ADHOC_BF", BATCH_SIZE=None)
        cmd = index._hybrid(5, "(@a_t:{x})")(np.zeros(4, dtype=np.float32))
        assert "EF_RUNTIME" not in cmd[2] and "HYBRID_POLICY ADHOC_BF" in cmd[2]
    finally:
        index.close()


def _odd_attrs(n: int, rng: np.random.Generator) -> Attributes:
    """Two labels per row, one on every fifth row, none on every thirteenth."""
    rows = [[] if i % 13 == 0 else [ODD[i % len(ODD)]] if i % 5 == 0
            else [ODD[i % len(ODD)], ODD[(i * 7 + 3) % len(ODD)]] for i in range(n)]
    return Attributes(n, {"year": rng.integers(1980, 2000, n)},
                      {"lab el": LabelColumn.from_rows(rows)})


def test_tag_special_characters_are_escaped_and_match(redis_env: str) -> None:
    rng = np.random.default_rng(3)
    n = 220
    x = rng.standard_normal((n, 8)).astype(np.float32)
    attrs = _odd_attrs(n, rng)
    index = create_index("redis", 8, "l2", {"algorithm": "FLAT"})
    try:
        index.attach_attributes(attrs)
        index.build(x)
        for label in ODD:
            rf = bind(Where(attr="lab el", eq=label), attrs, label="t")
            res = index.filtered_search(x[:3], n, rf)
            for row in res.ids:
                assert sorted(row[row >= 0].tolist()) == rf.rows.tolist(), label
        # an AND of a label set and a range, rendered as one query prefix
        both = [Where.model_validate({"attr": "lab el", "in": ["x|y", "{e}"]}),
                Where(attr="year", range=(1985, 1992))]
        mask = np.logical_and(*[where_mask(w, attrs, label="t") for w in both])
        prefix = query_filter(both, attrs)
        assert prefix == r"(@a_lab_el:{x\|y|\{e\}} @a_year:[1985 1992])"
        _, ids = index._knn(x[:2], n, prefix)
        for row in ids:
            assert sorted(row[row >= 0].tolist()) == np.flatnonzero(mask).tolist()
        # an int set: ORed single-value ranges
        rf = bind(Where.model_validate({"attr": "year", "in": [1981, 1990]}), attrs, label="t")
        res = index.filtered_search(x[:2], n, rf)
        assert sorted(res.ids[0][res.ids[0] >= 0].tolist()) == rf.rows.tolist()
    finally:
        index.close()


def test_fewer_matches_than_k_are_padded(redis_env: str) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((300, 8)).astype(np.float32)
    attrs = Attributes.from_columns({"row": np.arange(300)})
    index = create_index("redis", 8, "l2", HNSW)
    try:
        index.attach_attributes(attrs)
        index.build(x)
        index.set_search_params(EF_RUNTIME=50, HYBRID_POLICY="ADHOC_BF")
        rf = bind(Where(attr="row", range=(10, 12)), attrs, label="t")
        res = index.filtered_search(x[:4], 10, rf)
        assert (res.ids[:, :3] >= 10).all() and (res.ids[:, :3] <= 12).all()
        assert (res.ids[:, 3:] == -1).all() and np.isinf(res.distances[:, 3:]).all()
    finally:
        index.close()


def test_bad_inputs_are_one_line(redis_env: str) -> None:
    index = create_index("redis", 8, "l2", HNSW)
    try:
        with pytest.raises(ConfigError) as e:
            index.set_search_params(HYBRID_POLICY="BRUTE")
        text = str(e.value)
        assert "\n" not in text and "HYBRID_POLICY" in text and "BRUTE" in text
        assert all(p in text for p in ("AUTO", "BATCHES", "ADHOC_BF")), text
        index.set_search_params(HYBRID_POLICY="ADHOC_BF", BATCH_SIZE=4)
        x = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
        attrs = Attributes.from_columns({"row": np.arange(50)})
        with pytest.raises(DataError, match="attributes have 49 rows for 50 vectors"):
            index.attach_attributes(attrs.take(np.arange(49)))
            index.build(x)
        index.attach_attributes(attrs)
        index.build(x)
        rf = bind(Where(attr="row", range=(0, 5)), attrs, label="t")
        with pytest.raises(ConfigError) as e:
            index.filtered_search(x[:1], 5, rf)
        assert "BATCH_SIZE" in str(e.value) and "BATCHES" in str(e.value)
    finally:
        index.close()
    with pytest.raises(DataError, match="U\\+001F"):
        create_index("redis", 8, "l2").attach_attributes(
            Attributes.from_columns({"t": ["ok", "bad\x1fone"]}))
    plain = create_index("redis", 8, "l2", {"algorithm": "FLAT"})
    try:
        plain.build(np.zeros((5, 8), dtype=np.float32))
        rf = bind(Where(attr="row", range=(0, 1)), Attributes.from_columns(
            {"row": np.arange(5)}), label="t")
        with pytest.raises(ConfigError, match="attach_attributes"):
            plain.filtered_search(np.zeros((1, 8), dtype=np.float32), 2, rf)
    finally:
        plain.close()


SPEC = {
    "name": "filtered-redis-tiny",
    "dataset": {"kind": "synthetic", "n": 1500, "dim": 16, "n_queries": 30, "n_clusters": 8,
                "attributes": True},
    "k": 10, "target_recall": 0.9, "warmup": 2, "batch_repeats": 1,
    "indexes": [{"backend": "redis", "build": {"M": 8, "EF_CONSTRUCTION": 32},
                 "search": {"EF_RUNTIME": 10, "HYBRID_POLICY": ["BATCHES", "ADHOC_BF"]}}],
    "filters": {"selectivities": [0.01, 0.2], "attribute": "clustered",
                "strategies": ["engine", "prefilter", "postfilter"]},
}


def test_filtered_rwb_eval_with_redis(redis_env: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    import json

    spec = tmp_path / "f.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    assert main(["eval", str(spec), "--out", str(tmp_path / "o")]) == 0
    summary = json.loads(next((tmp_path / "o").rglob("summary.json")).read_text())
    rows = [r for r in summary["rows"] if r["strategy"] == "engine"]
    policies = {r["search"]["HYBRID_POLICY"] for r in rows}
    assert policies == {"BATCHES", "ADHOC_BF"}
    assert {r["bucket"] for r in rows} == {"sel=0.01", "sel=0.2"}
    assert all(0 < r["selectivity"] < 1 and "filter" in r for r in rows)
    adhoc = [r for r in rows if r["search"]["HYBRID_POLICY"] == "ADHOC_BF"]
    assert all(r["recall"] == 1.0 for r in adhoc), adhoc  # exact over the matches
    assert "redis" in summary["cliff_selectivity"]
    post = [r for r in summary["rows"] if r["strategy"] == "postfilter"]  # EF_RUNTIME raised
    assert post and all(0.0 <= r["recall"] <= 1.0 for r in post)
    capsys.readouterr()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**SPEC, "indexes": [
        {"backend": "redis", "search": {"EF_RUNTIME": 10, "HYBRID_POLICY": "BRUTE"}}]}))
    assert main(["eval", str(bad), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HYBRID_POLICY" in err and "ADHOC_BF" in err, err


def test_filtered_target_sweep_and_redis_export(redis_env: str, tmp_path: Path) -> None:
    from retrieval.exporting import export_run
    from retrieval.tune.spec import parse_spec
    from retrieval.tune.sweep import run_sweep

    spec = parse_spec({**SPEC, "tune": {"strategy": "target"},
                       "indexes": [{**SPEC["indexes"][0], "search": {
                           "EF_RUNTIME": 10, "HYBRID_POLICY": "ADHOC_BF"}}],
                       "filters": {**SPEC["filters"], "strategies": ["engine"]}})
    run = run_sweep(spec, tmp_path / "sweep").run
    out = tmp_path / "ops.redis.yaml"
    export_run(run.path, "redis", out)
    doc = yaml.safe_load(out.read_text())
    assert [op["strategy"] for op in doc["operating_points"]] == ["engine", "engine"]
    for op in doc["operating_points"]:
        assert "KNN" in op["filter_in_engine"] and op["evidence"]["recall"] == 1.0
        assert op["hybrid_query"] == {"HYBRID_POLICY": "ADHOC_BF"}
        assert op["config"]["vector_field"]["algorithm"] == "HNSW"
