"""pgvector filtered search on a real PostgreSQL: attributes as columns, a parameterised WHERE
clause, iterative scans; a filtered `rwb eval` with the engine strategy; bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("psycopg", reason="psycopg not installed (extra 'pgvector')")
pytest.importorskip("pgvector", reason="pgvector not installed (extra 'pgvector')")

from retrieval.engines.pgvector.hnsw import PgVectorHnsw
from retrieval.engines.pgvector.params import PgHnswBuild
from retrieval.errors import ConfigError, DataError
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.rows import RowFilter, bind
from retrieval.filtering.spec import Where
from retrieval.indexes.base import SupportsFilter
from retrieval.loaders.synthetic import make_synthetic
from retrieval.testing.filter_conformance import check_filtering
from retrieval.workload.buckets import Bucket
from retrieval.workload.truth import filtered_ground_truth, filtered_recall

# the session's pg_url fixture points $RWB_PG_URL (which the backends read) at its server
pytestmark = [pytest.mark.slow, pytest.mark.pgvector, pytest.mark.usefixtures("pg_url")]
K = 10


def test_conformance_with_a_relaxed_iterative_scan() -> None:
    recalls = check_filtering("pgvector", {"m": 16, "ef_construction": 64},
                              {"ef_search": 40, "iterative_scan": "relaxed_order"})
    assert len(recalls) == 4


def test_conformance_ivfflat() -> None:
    assert len(check_filtering("pgvector-ivfflat", {"lists": 16})) == 4


def _one_percent() -> tuple[object, RowFilter, np.ndarray]:
    ds = make_synthetic(3000, 16, 40, n_clusters=8, attributes=True, seed=3)
    assert ds.attributes is not None
    col = np.sort(ds.attributes.ints["uniform"])
    rf = bind(Where(attr="uniform", range=(int(col[1000]), int(col[1029]))), ds.attributes,
              label="test")
    gt = filtered_ground_truth(ds.base, ds.queries, ds.metric,
                               Bucket("b", None, (rf,), np.zeros(ds.n_queries, dtype=np.int64)), K)
    return ds, rf, gt


def test_iterative_scan_recovers_matches_at_one_percent() -> None:
    """At ~1% selectivity an HNSW scan with iterative_scan off returns at most ef_search
    candidates before the WHERE clause, so it finds few of the k matches; relaxed_order keeps
    scanning (pgvector's documented behaviour). The plan scans the vector index in both."""
    ds, rf, gt = _one_percent()
    assert 0.005 < rf.selectivity < 0.02
    with PgVectorHnsw(ds.dim, ds.metric, PgHnswBuild(m=16, ef_construction=64)) as index:
        assert isinstance(index, SupportsFilter)
        index.attach_attributes(ds.attributes)
        info = index.build(ds.base)
        assert info.extra["attribute_indexes"] == []
        assert all(p.startswith("Index Scan using") and p.endswith("_idx")
                   for p in info.extra["filter_plans"].values())
        got = {}
        for mode in ("off", "relaxed_order"):
            index.set_search_params(ef_search=40, iterative_scan=mode)
            res = index.filtered_search(ds.queries, K, rf)
            valid = res.ids >= 0
            assert rf.mask[res.ids[valid]].all()
            got[mode] = (float(filtered_recall(res.ids, gt, K).mean()), valid.sum(1).mean())
            plan = index.filter_plans['"a_uniform" BETWEEN %(lo)s AND %(hi)s']
            assert plan == f"Index Scan using {index.table}_idx"
    assert got["relaxed_order"][0] >= 0.9 and got["relaxed_order"][1] == K
    assert got["off"][0] < got["relaxed_order"][0] - 0.5, got
    assert got["off"][1] < K  # fewer than k found: -1 padded


def test_attribute_indexes_let_the_planner_choose_and_record_it() -> None:
    """With GIN / B-tree indexes on the attribute columns the planner may answer a selective
    filter from them (exact): the chosen scan is recorded, the results stay inside the filter."""
    ds, rf, gt = _one_percent()
    with PgVectorHnsw(ds.dim, ds.metric, PgHnswBuild(m=16, ef_construction=64),
                      attribute_indexes=True) as index:
        index.attach_attributes(ds.attributes)
        info = index.build(ds.base)
        made = info.extra["attribute_indexes"]
        assert any("USING gin" in s for s in made) and any("USING btree" in s for s in made)
        index.set_search_params(ef_search=40, iterative_scan="off")
        res = index.filtered_search(ds.queries, K, rf)
        assert rf.mask[res.ids[res.ids >= 0]].all()
        plan = index.filter_plans['"a_uniform" BETWEEN %(lo)s AND %(hi)s']
        assert f"{index.table}_" in plan
        if not plan.endswith("_idx"):  # an attribute index: a pre-filter, exact
            assert float(filtered_recall(res.ids, gt, K).mean()) == 1.0


def test_values_are_parameters_not_sql() -> None:
    """A label value that looks like SQL is matched as a plain string."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 8)).astype(np.float32)
    evil = "x'); DROP TABLE pg_class; --"
    attrs = Attributes.from_columns({"tag": [evil if i % 10 == 0 else "a" for i in range(200)]})
    with PgVectorHnsw(8, "l2", PgHnswBuild(m=8, ef_construction=32)) as index:
        index.attach_attributes(attrs)
        index.build(x)
        index.set_search_params(ef_search=100, iterative_scan="strict_order")
        rf = bind(Where(attr="tag", eq=evil), attrs, label="t")
        res = index.filtered_search(x[:3], K, rf)
        assert set(res.ids.ravel().tolist()) <= set(range(0, 200, 10))
        assert (res.ids >= 0).all()


def test_bad_attribute_name_and_filters_one_line() -> None:
    attrs = Attributes.from_columns({'year"; DROP TABLE t; --': np.arange(50)})
    with PgVectorHnsw(4, "l2") as index:
        with pytest.raises(ConfigError) as err:
            index.attach_attributes(attrs)
        text = str(err.value)
        assert "\n" not in text and "safe SQL identifier" in text and "DROP TABLE" in text
        x = np.random.default_rng(1).standard_normal((50, 4)).astype(np.float32)
        index.build(x)
        ok = Attributes.from_columns({"tag": ["a"] * 50, "year": np.arange(50)})
        with pytest.raises(ConfigError, match="attach_attributes"):
            index.filtered_search(x[:1], 5, bind(Where(attr="year", eq=3), ok, label="t"))
        index.attach_attributes(ok)  # attached after the build: the table has no columns
        with pytest.raises(ConfigError, match="built without attributes"):
            index.filtered_search(x[:1], 5, bind(Where(attr="year", eq=3), ok, label="t"))
        index.build(x)
        index.set_search_params(iterative_scan="strict_order")
        assert index.filtered_search(x[:1], 5, bind(Where(attr="year", eq=3), ok,
                                                    label="t")).ids[0].tolist() == [3, -1, -1,
                                                                                   -1, -1]
        with pytest.raises(ConfigError, match=r"field 'tag\.range'"):
            index.filtered_search(x[:1], 5, RowFilter(Where(attr="tag", range=(1, 2)),
                                                      np.ones(50, dtype=bool)))
        with pytest.raises(DataError) as short:  # 50 attribute rows for 40 vectors
            index.build(x[:40])
        assert "\n" not in str(short.value) and "50 rows for 40 vectors" in str(short.value)
        index.build(x)
        with pytest.raises(ConfigError, match="unknown attribute 'yeer'"):
            index.filtered_search(x[:1], 5, RowFilter(Where(attr="yeer", eq=1),
                                                      np.ones(50, dtype=bool)))


def _spec(tmp_path: Path, attrs_file: Path | None = None) -> Path:
    if attrs_file is None:
        dataset = {"kind": "synthetic", "n": 1500, "dim": 16, "n_queries": 20, "n_clusters": 8,
                   "attributes": True}
    else:
        rng = np.random.default_rng(2)
        np.save(tmp_path / "base.npy", rng.standard_normal((300, 8)).astype(np.float32))
        np.save(tmp_path / "queries.npy", rng.standard_normal((10, 8)).astype(np.float32))
        dataset = {"kind": "npy", "base": str(tmp_path / "base.npy"), "metric": "l2",
                   "queries": str(tmp_path / "queries.npy"), "attributes": str(attrs_file)}
    spec = {
        "name": "filtered-pg-tiny", "dataset": dataset, "k": K, "target_recall": 0.9,
        "warmup": 2, "batch_repeats": 1,
        "indexes": [{"backend": "pgvector", "build": {"m": 16, "ef_construction": 64},
                     "search": {"ef_search": [40], "iterative_scan": ["off", "relaxed_order"]}}],
        "filters": {"selectivities": [0.01, 0.2], "attribute": "uniform",
                    "strategies": ["engine"]},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_filtered_rwb_eval_with_pgvector_engine(tmp_path: Path, capsys) -> None:
    import json

    from retrieval.cli import main

    out = tmp_path / "run"
    assert main(["eval", str(_spec(tmp_path)), "--out", str(out), "--json"]) == 0
    s = json.loads((out / "summary.json").read_text())
    rows = [r for r in s["rows"] if r["strategy"] == "engine"]
    assert {r["bucket"] for r in rows} == {"sel=0.01", "sel=0.2"}
    by = {(r["bucket"], r["search"]["iterative_scan"]): r["recall"] for r in rows}
    assert by[("sel=0.01", "relaxed_order")] >= 0.9
    assert by[("sel=0.01", "off")] < by[("sel=0.01", "relaxed_order")]
    assert all(r["p95_ms"] > 0 and 0 < r["selectivity"] < 1 for r in rows)
    assert "pgvector" in s["cliff_selectivity"]


def test_rwb_eval_refuses_an_unsafe_attribute_name(tmp_path: Path, capsys) -> None:
    from retrieval.cli import main

    arr = np.zeros(300, dtype=[("uniform", "i8"), ("bad-name", "i8")])
    arr["uniform"] = np.arange(300) * 7
    np.save(tmp_path / "attrs.npy", arr)
    assert main(["eval", str(_spec(tmp_path, tmp_path / "attrs.npy")),
                 "--out", str(tmp_path / "run")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "safe SQL identifier" in ln]
    assert len(err) == 1 and "'bad-name'" in err[0]


def test_filtered_pgvector_spec_loads() -> None:
    from retrieval.paths import REPO_ROOT
    from retrieval.tune.spec import load_spec

    spec = load_spec(REPO_ROOT / "sweeps" / "filtered-pgvector.yaml")
    assert spec.filters is not None and "engine" in spec.filters.strategies
    scans = {e.label: e.search.get("iterative_scan") for e in spec.indexes
             if e.backend == "pgvector"}
    assert scans == {"pgvector-relaxed": "relaxed_order", "pgvector-off": "off"}


def test_target_sweep_exports_the_iterative_scan(tmp_path: Path) -> None:
    """An engine operating point with an iterative scan exports to pgvector with its SET lines
    (the scan has no library-neutral form, so only pgvector itself can carry it)."""
    from retrieval.exporting import export_run
    from retrieval.tune.spec import load_spec
    from retrieval.tune.sweep import run_sweep

    doc = yaml.safe_load(_spec(tmp_path).read_text())
    doc["indexes"][0]["search"] = {"ef_search": [10, 200], "iterative_scan": "relaxed_order"}
    doc["tune"] = {"strategy": "target"}
    path = tmp_path / "target.yaml"
    path.write_text(yaml.safe_dump(doc))
    run = run_sweep(load_spec(path), tmp_path / "sweep").run
    out = tmp_path / "ops.pgvector.yaml"
    export_run(run.path, "pgvector", out)
    ops = yaml.safe_load(out.read_text())["operating_points"]
    assert [o["strategy"] for o in ops] == ["engine", "engine"]
    for op in ops:
        assert "SET hnsw.iterative_scan = relaxed_order;" in op["config"]["set"]
        assert op["config"]["search_params"]["iterative_scan"] == "relaxed_order"
        assert "WHERE" in op["filter_in_engine"]
    # verify reads the scan back from the SET lines and re-measures each bucket on pgvector
    from retrieval.exporting import verify_file

    rep = verify_file(out).to_dict()
    assert rep["measurable"] and {p["backend"] for p in rep["points"]} == {"pgvector"}
    assert all(c["passed"] for c in rep["checks"] if "config is" in c["check"]
               or "evidence." in c["check"]), rep["checks"]
