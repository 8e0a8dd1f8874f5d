"""LanceDB (embedded, extra 'lancedb') end to end: the shipped spec sweeps/lancedb.yaml is tuned
by `rwb sweep --strategy target`, exported with `rwb export --engine lancedb` in LanceDB's own
names, and `rwb verify` HOLDS on that file; an edited config fails naming the field. Also: the
caller's folder is never touched, a too-small table and a silent flat scan are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from retrieval.cli import main
from retrieval.errors import BackendError, ConfigError
from retrieval.exporting.files import read_config
from retrieval.indexes.engine import get_engine
from retrieval.indexes.registry import create_index
from retrieval.loaders.synthetic import make_synthetic
from retrieval.paths import REPO_ROOT
from retrieval.testing.conformance import exact_neighbours
from tests.helpers import export_cli, verify_json

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

pytest.importorskip("lancedb", reason="lancedb not installed (extra 'lancedb')")

SPEC = Path(REPO_ROOT) / "sweeps" / "lancedb.yaml"
BACKENDS = ("lancedb-ivfpq", "lancedb-hnsw")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The shipped spec swept with a build cache of this module's own: LanceDB builds are not
    reproducible (unseeded k-means), so verify re-measures the sweep's own index, loaded from
    the cache (a Lance table folder), as a user's verify does."""
    out = tmp_path_factory.mktemp("sweep") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RWB_INDEX_CACHE_DIR", str(tmp_path_factory.mktemp("index-cache")))
        mp.delenv("RWB_INDEX_CACHE", raising=False)
        assert main(["sweep", str(SPEC), "--strategy", "target", "--out", str(out)]) == 0
        yield out



def test_engine_descriptor_names_its_backends_and_knobs():
    desc = get_engine("lancedb")
    assert desc.backends == BACKENDS and desc.extra == "lancedb"
    assert desc.ef_knob == "ef" and {"nprobes", "refine_factor"} <= set(desc.knobs)
    assert desc.to_native is not None and desc.from_native is not None


def test_target_strategy_tunes_both_backends(run):
    s = json.loads((run / "summary.json").read_text())
    assert s["strategy"] == "target"
    for backend in BACKENDS:
        chosen = s["backends"][backend]["chosen"]
        assert chosen is not None and chosen["recall_lb"] >= s["target_recall"], backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_export_in_lancedb_names_and_verify_holds(run, tmp_path, capsys, backend):
    path = export_cli(run, tmp_path, "lancedb", backend)
    doc = read_config(path)
    cfg = doc["config"]
    assert doc["engine"] == "lancedb" and doc["evidence"]["measured_on"] == backend
    assert cfg["create_index"]["index_type"] == {"lancedb-ivfpq": "IVF_PQ",
                                                 "lancedb-hnsw": "IVF_HNSW_SQ"}[backend]
    assert cfg["create_index"]["distance_type"] == cfg["query"]["distance_type"] == "l2"
    assert cfg["dim"] == 32 and cfg["query"]["nprobes"] >= 1
    code, report = verify_json(capsys, str(path))
    assert report["backend"] == backend and report["engine"] == "lancedb"
    failed = [c for c in report["file_checks"] if not c["passed"]]
    assert not failed, failed
    assert report["holds"] and code == 0, report["measured"]
    # the sweep's own index, loaded from the build cache: the evidence is reproduced exactly
    assert report["measured"]["recall"] == pytest.approx(doc["evidence"]["recall"], abs=1e-6)


@pytest.mark.parametrize(("backend", "edit", "field"), [
    ("lancedb-ivfpq", lambda c: c["query"].update(nprobes=c["query"]["nprobes"] + 1),
     "config.query.nprobes"),
    ("lancedb-ivfpq", lambda c: c["create_index"].update(num_sub_vectors=4),
     "config.create_index.num_sub_vectors"),
    ("lancedb-hnsw", lambda c: c["query"].update(ef=c["query"]["ef"] + 5), "config.query.ef"),
    ("lancedb-hnsw", lambda c: c["create_index"].update(m=8), "config.create_index.m"),
])
def test_edited_config_fails_naming_the_field(run, tmp_path, capsys, backend, edit, field):
    path = export_cli(run, tmp_path, "lancedb", backend)
    doc = yaml.safe_load(path.read_text())
    edit(doc["config"])
    path.write_text(yaml.safe_dump(doc))
    code, report = verify_json(capsys, str(path))
    assert code == 1 and not report["holds"]
    failed = [f for c in report["file_checks"] if not c["passed"] for f in c["fields"]]
    assert field in failed


@pytest.mark.parametrize(("edit", "field"), [
    (lambda c: c["create_index"].update(sample_rate=128), "config.create_index.sample_rate"),
    (lambda c: c["query"].update(distance_type="cosine"), "config.query.distance_type"),
    (lambda c: c["query"].update(nprobes=99), "config.query.nprobes"),
    (lambda c: c["create_index"].update(index_type="IVF_FLAT"), "config.create_index.index_type"),
])
def test_config_outside_the_rules_is_one_line(run, tmp_path, capsys, edit, field):
    path = export_cli(run, tmp_path, "lancedb", "lancedb-ivfpq")
    doc = yaml.safe_load(path.read_text())
    edit(doc["config"])
    path.write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"field '{field}'" in err, err


def test_ivfpq_result_translates_to_faiss_ivf_pq_with_refine(run, tmp_path):
    cfg = read_config(export_cli(run, tmp_path, "faiss", "lancedb-ivfpq"))["config"]
    q = read_config(export_cli(run, tmp_path, "lancedb", "lancedb-ivfpq"))["config"]["query"]
    assert cfg["index_factory"] == "IVF8,PQ8x8np,RFlat"
    assert cfg["parameter_space"] == (f"nprobe={q['nprobes']},"
                                      f"k_factor_rf={q['refine_factor']}")


# --- the adapter -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def data():
    return make_synthetic(1200, 16, 20, metric="l2", seed=1, cluster_spread=3.0)


def test_lives_in_its_own_folder_under_the_workdir(tmp_path, data):
    mine = tmp_path / "users.lance"
    mine.mkdir()
    (mine / "keep.txt").write_text("not rwb's")
    index = create_index("lancedb-ivfpq", 16, "l2", {"num_partitions": 4, "num_sub_vectors": 4},
                         workdir=tmp_path)
    info = index.build(data.base)
    made = [p for p in tmp_path.iterdir() if p.name != "users.lance"]
    assert len(made) == 1 and made[0].name.startswith("lancedb-")
    assert info.memory_bytes == index.memory_bytes() > 0
    assert info.extra["index_bytes"] > 0 and info.extra["indexed_rows"] == 1200
    index.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users.lance"]
    assert (mine / "keep.txt").read_text() == "not rwb's"


def test_too_few_vectors_per_partition_is_one_line(data):
    index = create_index("lancedb-ivfpq", 16, "l2", {"num_partitions": 8, "num_sub_vectors": 4})
    with pytest.raises(ConfigError, match=r"field 'num_partitions' must be <= 4 for 1200"):
        index.build(data.base)
    index.close()


def test_num_sub_vectors_must_divide_the_dimension():
    with pytest.raises(ConfigError, match=r"field 'num_sub_vectors' must be a divisor of the "
                                          r"dimension 16; received 5"):
        create_index("lancedb-ivfpq", 16, "l2", {"num_partitions": 2, "num_sub_vectors": 5})


def test_hnsw_ef_below_k_times_refine_factor_is_refused(data):
    index = create_index("lancedb-hnsw", 16, "l2", {"m": 8, "ef_construction": 32})
    index.build(data.base)
    index.set_search_params(ef=20, refine_factor=4)
    with pytest.raises(ConfigError, match=r"field 'ef' must be >= k \* refine_factor"):
        index.search(data.queries, 10)
    index.set_search_params(ef=40)
    assert index.search(data.queries, 10).ids.shape == (20, 10)
    index.close()


def test_a_silent_flat_scan_is_caught(monkeypatch, data):
    """LanceDB answers by brute force when told to bypass its index (as it does, with a log
    line only, when the query's distance type is not the index's): recall and ids no longer
    move with nprobes, and the check says so."""
    exact = exact_neighbours(data, 10)[0]
    index = create_index("lancedb-ivfpq", 16, "l2", {"num_partitions": 4, "num_sub_vectors": 4})
    index.build(data.base)
    check = index.verify_not_brute_force(data.queries, 10, exact)
    assert check.ok and check.recall_low < check.recall_high
    query = index._query
    monkeypatch.setattr(index, "_query", lambda *a: query(*a).bypass_vector_index())
    with pytest.raises(BackendError, match="brute force"):
        index.verify_not_brute_force(data.queries, 10, exact)
    index.close()


def test_ip_distances_are_rwb_negative_inner_products():
    ds = make_synthetic(1200, 16, 10, metric="ip", seed=2, cluster_spread=3.0)
    index = create_index("lancedb-ivfpq", 16, "ip", {"num_partitions": 4, "num_sub_vectors": 4})
    index.build(ds.base)
    index.set_search_params(nprobes=4, refine_factor=8)
    res = index.search(ds.queries, 5)
    want = -np.einsum("qkd,qd->qk", ds.base[res.ids], ds.queries)
    np.testing.assert_allclose(res.distances, want, rtol=1e-4, atol=1e-4)
    index.close()


def test_a_build_whose_query_plan_skips_the_index_is_refused(monkeypatch, data):
    from retrieval.engines.lancedb.index import LanceIndex

    query = LanceIndex._query
    monkeypatch.setattr(LanceIndex, "_query",
                        lambda self, *a: query(self, *a).bypass_vector_index())
    index = create_index("lancedb-hnsw", 16, "l2", {"m": 8, "ef_construction": 32})
    with pytest.raises(BackendError, match="does not read the vector index"):
        index.build(data.base)
    index.close()
