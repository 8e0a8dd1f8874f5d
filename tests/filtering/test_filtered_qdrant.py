"""Qdrant's own filters (payload + payload indexes, ``Filter`` in the QueryRequest) and its
ACORN knob, against the real embedded engine (qdrant-edge-py)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("qdrant_edge", reason="qdrant-edge-py not installed")

from retrieval.cli import main
from retrieval.engines.qdrant.params import check_acorn
from retrieval.errors import ConfigError, DataError
from retrieval.filtering.rows import RowFilter, bind
from retrieval.filtering.spec import Where
from retrieval.indexes.registry import create_index
from retrieval.loaders.synthetic import make_synthetic
from retrieval.testing.filter_conformance import check_filtering
from retrieval.tune.runner import run_eval
from retrieval.tune.spec import parse_spec
from retrieval.workload.buckets import Bucket
from retrieval.workload.truth import filtered_ground_truth, filtered_recall

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

K = 10
BUILD = {"m": 16, "ef_construct": 100}


@pytest.mark.parametrize("acorn", [False, True], ids=["acorn-off", "acorn-on"])
def test_qdrant_filter_conformance(acorn: bool, tmp_path: Path) -> None:
    recalls = check_filtering("qdrant", BUILD, {"hnsw_ef": 1000, "acorn": acorn},
                              workdir=tmp_path)
    assert len(recalls) == 4


def _recall_by_selectivity(index, ds, attrs, windows, acorn: bool) -> dict[float, float]:
    index.set_search_params(hnsw_ef=K, acorn=acorn)
    col, out = attrs.ints["uniform"], {}
    order = np.sort(col)
    for s in windows:
        width = round(s * ds.n_base)
        rf = bind(Where(attr="uniform", range=(int(order[0]), int(order[width - 1]))), attrs,
                  label="test")
        bucket = Bucket("b", None, (rf,), np.zeros(ds.n_queries, dtype=np.int64))
        gt = filtered_ground_truth(ds.base, ds.queries, ds.metric, bucket, K)
        res = index.filtered_search(ds.queries, K, rf)
        assert rf.mask[res.ids[res.ids >= 0]].all()
        out[s] = float(filtered_recall(res.ids, gt, K).mean())
    return out


def test_acorn_on_and_off_both_run_and_are_recorded(tmp_path: Path) -> None:
    """At hnsw_ef = k on a 10% filter, Qdrant's filtered walk loses neighbours; ACORN (which
    also explores the neighbours of filtered-out nodes) does not lose more. Both recalls are
    recorded (printed with -s)."""
    ds = make_synthetic(3000, 32, 60, n_clusters=8, attributes=True, seed=5)
    attrs = ds.attributes
    assert attrs is not None
    index = create_index("qdrant", ds.dim, ds.metric, BUILD, workdir=tmp_path)
    try:
        index.attach_attributes(attrs)
        info = index.build(ds.base)
        assert set(info.extra["payload_indexes"]) == {"a_cluster", "a_clustered", "a_tag",
                                                       "a_uniform"}
        assert info.extra["payload_indexes"]["a_uniform"] == {"type": "Integer", "points": 3000}
        windows = (0.1, 0.6)
        off = _recall_by_selectivity(index, ds, attrs, windows, acorn=False)
        on = _recall_by_selectivity(index, ds, attrs, windows, acorn=True)
    finally:
        index.close()
    print(json.dumps({"hnsw_ef": K, "recall_acorn_off": off, "recall_acorn_on": on}))
    assert on[0.1] >= off[0.1]
    assert all(0.0 < r <= 1.0 for r in (*off.values(), *on.values()))


SPEC = {
    "name": "filtered-qdrant-tiny",
    "dataset": {"kind": "synthetic", "n": 2000, "dim": 16, "n_queries": 30, "n_clusters": 8,
                "attributes": True},
    "k": K, "target_recall": 0.9, "warmup": 2, "batch_repeats": 1,
    "indexes": [{"backend": "qdrant", "build": BUILD,
                 "search": {"hnsw_ef": [10, 200], "acorn": [False, True]}}],
    "filters": {"selectivities": [0.02, 0.2], "attribute": "uniform",
                "strategies": ["engine", "postfilter"], "overfetch": 4},
}


def test_filtered_eval_with_qdrant_engine_strategy(tmp_path: Path) -> None:
    s = run_eval(parse_spec(SPEC), tmp_path / "eval").summary
    post = [r for r in s["rows"] if r["strategy"] == "postfilter"]
    assert {r["bucket"] for r in post} == {"sel=0.02", "sel=0.2"}  # hnsw_ef raised to 4 * k
    assert all(0.0 <= r["recall"] <= 1.0 for r in post)
    rows = [r for r in s["rows"] if r["label"] == "qdrant" and r["strategy"] == "engine"]
    assert {r["bucket"] for r in rows} == {"sel=0.02", "sel=0.2"}
    assert {(r["search"]["hnsw_ef"], r["search"]["acorn"]) for r in rows} == {
        (10, False), (10, True), (200, False), (200, True)}
    assert all(0 < r["selectivity"] < 1 and 0.0 <= r["recall"] <= 1.0 for r in rows)
    # ACORN at hnsw_ef 200 meets 0.9 in both buckets (without it, the 2% filter's matches are
    # too sparse in the graph to be walked: recall there stays near 0.9 at any hnsw_ef)
    wide = [r["recall"] for r in rows if r["search"]["hnsw_ef"] == 200
            and (r["search"]["acorn"] or r["bucket"] == "sel=0.2")]
    assert len(wide) == 3 and min(wide) >= 0.9
    assert "qdrant" in s["cliff_selectivity"]


def test_filtered_target_sweep_tunes_qdrant_with_acorn_off_and_on(tmp_path: Path) -> None:
    from retrieval.tune.sweep import run_sweep

    entries = [{"backend": "qdrant", "label": f"qdrant-acorn-{on}", "build": BUILD,
                "search": {"hnsw_ef": [10], "acorn": on}} for on in (False, True)]
    spec = parse_spec({**SPEC, "indexes": entries, "tune": {"strategy": "target"},
                       "filters": {**SPEC["filters"], "strategies": ["engine"]}})
    s = run_sweep(spec, tmp_path / "sweep").summary
    got = {(c["label"], c["bucket"]) for c in s["choices"]}
    assert got == {(f"qdrant-acorn-{on}", b) for on in (False, True)
                   for b in ("sel=0.02", "sel=0.2")}
    assert {r["search"]["acorn"] for r in s["rows"]} == {False, True}
    assert set(s["cliff_selectivity"]) == {"qdrant-acorn-False", "qdrant-acorn-True"}
    print(json.dumps({"cliff_by_strategy": s["cliff_by_strategy"],
                      "choices": [{k: c.get(k) for k in ("label", "bucket", "chosen", "knob",
                                                         "recall_lb", "p95_ms")}
                                  for c in s["choices"]]}, default=str))


# --- bad input -------------------------------------------------------------------------------
def test_acorn_on_an_engine_without_it_is_one_line() -> None:
    """A qdrant-edge-py without ACORN (an empty module stands in for such a wheel) refuses
    acorn: true; the installed one has it."""
    check_acorn()  # the real 0.9.0 wheel: no error
    with pytest.raises(ConfigError) as e:
        check_acorn(types.ModuleType("qdrant_edge"))
    msg = str(e.value)
    assert "\n" not in msg and "field 'acorn'" in msg and "ACORN" in msg


def test_unknown_or_misplaced_knob_is_one_line(tmp_path: Path, capsys) -> None:
    index = create_index("qdrant", 16, "l2", BUILD)
    try:
        with pytest.raises(ConfigError, match="acron") as e:
            index.set_search_params(acron=True)
        assert "\n" not in str(e.value)
        with pytest.raises(ConfigError, match="'acorn'") as e2:
            type(index).knob_range("acorn", index.build_params, K)
        assert "\n" not in str(e2.value) and "hnsw_ef" in str(e2.value)
    finally:
        index.close()
    bad = {**SPEC, "indexes": [{"backend": "qdrant", "build": BUILD,
                                "search": {"hnsw_ef": [10], "acorn_max_selectivity": [0.3]}}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    assert main(["eval", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "acorn_max_selectivity" in err[0] and "acorn is true" in err[0]


def test_filtered_search_bad_input(tmp_path: Path) -> None:
    ds = make_synthetic(300, 8, 5, n_clusters=4, attributes=True, seed=1)
    attrs = ds.attributes
    assert attrs is not None
    rf = bind(Where(attr="tag", eq="t1"), attrs, label="test")
    index = create_index("qdrant", ds.dim, ds.metric, BUILD, workdir=tmp_path)
    try:
        index.build(ds.base)  # no attributes attached
        with pytest.raises(ConfigError, match="attach_attributes"):
            index.filtered_search(ds.queries, K, rf)
        index.attach_attributes(attrs.take(np.arange(100)))
        with pytest.raises(DataError, match="100 rows for 300 vectors"):
            index.build(ds.base)
        index.attach_attributes(attrs)
        index.build(ds.base)
        range_on_label = RowFilter(Where(attr="tag", range=(0, 1)), rf.mask)
        with pytest.raises(ConfigError, match="range needs an integer attribute"):
            index.filtered_search(ds.queries, K, range_on_label)
        unknown = RowFilter(Where(attr="tga", eq="t1"), rf.mask)
        with pytest.raises(ConfigError, match="tga"):
            index.filtered_search(ds.queries, K, unknown)
    finally:
        index.close()


def test_filtered_qdrant_spec_loads() -> None:
    from retrieval.paths import REPO_ROOT
    from retrieval.tune.spec import load_spec

    spec = load_spec(REPO_ROOT / "sweeps" / "filtered-qdrant.yaml")
    assert spec.filters is not None and "engine" in spec.filters.strategies
    assert sorted(e.search["acorn"] for e in spec.indexes if e.backend == "qdrant") == [False,
                                                                                      True]


def test_an_acorn_operating_point_exports_to_qdrant_with_its_acorn_params() -> None:
    """ACORN has no library-neutral form: exported to Qdrant it is ``search_params.acorn`` (REST
    names), read back by verify's inverse; exported to another engine it is left out."""
    from retrieval.engines.qdrant.export import from_qdrant
    from retrieval.exporting.filtered import _entry

    op = {"bucket": "sel=0.02", "selectivity": 0.02, "strategy": "engine", "backend": "qdrant",
          "label": "qdrant-acorn", "build": BUILD, "p95_ms": 1.0, "recall": 0.95,
          "search": {"hnsw_ef": 64, "acorn": True, "acorn_max_selectivity": 0.3}}
    doc = _entry(op, "qdrant", "l2", 16, K)
    sp = doc["config"]["search"]["params"]
    assert sp["hnsw_ef"] == 64 and sp["acorn"] == {"enable": True, "max_selectivity": 0.3}
    back = from_qdrant(doc["config"], "l2", 16, K, where="f.yaml")
    assert back.search["acorn"] is True and back.search["acorn_max_selectivity"] == 0.3
    off = _entry({**op, "search": {"hnsw_ef": 64, "acorn": False}}, "qdrant", "l2", 16, K)
    assert "acorn" not in off["config"]["search"]["params"]
    other = _entry(op, "hnswlib", "l2", 16, K)
    assert other["config"] is not None and "acorn" not in json.dumps(other["config"])
