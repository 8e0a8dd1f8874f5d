"""rwb export -> file in the engine's own names with its evidence -> rwb verify, for every engine
format; plus the bad cases (nothing feasible, unknown engine, missing data, secrets)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from retrieval.cli import main
from retrieval.exporting.engines import own_backends
from retrieval.exporting.files import read_config
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import apply_overrides, run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

SPEC = {
    "name": "export-rt",
    "dataset": "synthetic-small",
    "k": 10,
    "warmup": 4,
    "batch_repeats": 1,
    "target_recall": 0.9,
    "index_build": {"threads": 1},  # reproducible builds (verify below rebuilds or loads)
    "indexes": [
        {"backend": "faiss-flat"},
        {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
         "search": {"ef_search": 10}},
        {"backend": "faiss-hnsw", "build": {"M": 8, "ef_construction": 40},
         "search": {"ef_search": 10}},
        {"backend": "faiss-ivf", "build": {"nlist": 32}, "search": {"nprobe": 1}},
    ],
    "tune": {"strategy": "target", "search_range": {"ef_search": [10, 64], "nprobe": [1, 32]}},
}
NAMES = {
    "milvus": {"index_type", "metric_type", "params", "search_params"},
    "faiss": {"index_factory", "parameter_space", "metric", "normalize_vectors", "dim",
              "index_fields"},
    "hnswlib": {"space", "dim", "M", "ef_construction", "ef"},
    "qdrant": {"create_collection", "search", "measurement_settings"},
    "redis": {"ft_create", "vector_field", "query", "query_params", "dialect", "ft_search"},
    "weaviate": {"vectorIndexType", "vectorIndexConfig"},
}
EVIDENCE = ("target_recall", "recall", "recall_lower_bound", "heldout_recall", "latency_ms",
            "qps", "dataset", "cpu", "library_versions", "rwb_version", "run_id")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "run"
    run_sweep(parse_spec(SPEC, source="export.yaml"), out)
    return out


@pytest.mark.parametrize("engine", sorted(NAMES))
def test_round_trip(run, tmp_path, engine, capsys):
    path = tmp_path / f"tuned.{engine}.yaml"
    assert main(["export", str(run), "--engine", engine, "--out", str(path)]) == 0
    doc = read_config(path)
    assert doc["engine"] == engine and set(doc["config"]) == NAMES[engine]
    ev = doc["evidence"]
    for key in EVIDENCE:
        assert ev.get(key) is not None, key
    assert ev["recall_lower_bound"] >= ev["target_recall"] == 0.9
    assert set(ev["latency_ms"]) >= {"p50", "p95", "p99"}
    assert len(ev["dataset"]["fingerprint"]) == 16
    capsys.readouterr()
    if engine == "weaviate":  # rwb cannot run it: never HOLDS, its own exit code
        assert main(["verify", str(path), "--json"]) == 3
        assert json.loads(capsys.readouterr().out)["measurable"] is False
        return
    if engine == "redis" and not os.environ.get("REDIS_URL"):
        pytest.skip("REDIS_URL not set: verify measures a redis export on Redis")
    code = main(["verify", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["fingerprint_matches"] and report["engine"] == engine
    # the evidence is reproduced on the backend that measured it (deterministic builds: exactly)
    assert all(c["passed"] for c in report["file_checks"]), report["file_checks"]
    if ev["measured_on"] in own_backends(engine):
        assert code == 0 and report["holds"]
        assert report["measured"]["recall"] == pytest.approx(ev["recall"], abs=1e-6)
    else:
        # a translation, measured now on the engine itself (an unseeded or multi-threaded build
        # there: its bound lands near the 0.9 target, on either side). Judged against a target
        # well below and one well above what the engine reaches, the outcome is certain.
        assert report["backend"] in own_backends(engine)
        lb = report["measured"]["recall_lb"]
        assert 0.8 <= lb < 0.999, lb
        doc = yaml.safe_load(path.read_text())
        for target, expected in ((0.6, 0), (0.99999, 1)):
            doc["evidence"]["target_recall"] = target
            path.write_text(yaml.safe_dump(doc))
            code = main(["verify", str(path), "--json"])
            report = json.loads(capsys.readouterr().out)
            assert (code, report["holds"]) == (expected, expected == 0), (target, report)


def test_json_format_and_faiss_backend_choice(run, tmp_path):
    path = tmp_path / "ivf.json"
    assert main(["export", str(run), "--engine", "faiss", "--backend", "faiss-ivf",
                 "--out", str(path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["config"]["index_factory"] == "IVF32,Flat"
    assert doc["config"]["parameter_space"].startswith("nprobe=")
    assert doc["source"]["backend"] == "faiss-ivf"


def test_verify_fails_when_the_config_no_longer_holds(run, tmp_path, capsys):
    path = tmp_path / "h.yaml"
    assert main(["export", str(run), "--engine", "hnswlib", "--out", str(path)]) == 0
    doc = yaml.safe_load(path.read_text())
    doc["evidence"]["target_recall"] = 0.99999
    path.write_text(yaml.safe_dump(doc))
    assert main(["verify", str(path)]) == 1
    assert "FAILS" in capsys.readouterr().out


def test_verify_against_missing_data(run, tmp_path, capsys):
    path = tmp_path / "h.yaml"
    assert main(["export", str(run), "--engine", "hnswlib", "--out", str(path)]) == 0
    doc = yaml.safe_load(path.read_text())
    doc["source"]["dataset"] = {"kind": "npy", "base": str(tmp_path / "gone/base.npy"),
                                "queries": str(tmp_path / "gone/queries.npy"), "metric": "l2"}
    path.write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["verify", str(path)]) == 3  # the data is not reachable: not measurable here
    err = capsys.readouterr().err
    assert err.startswith("rwb: not measurable here:") and "gone/base.npy" in err
    assert err.count("\n") == 1


def test_unknown_engine_suggests_the_closest(run, tmp_path, capsys):
    assert main(["export", str(run), "--engine", "qdrnt", "--out", str(tmp_path / "x")]) == 2
    assert "Did you mean 'qdrant'" in capsys.readouterr().err


def test_engine_that_cannot_take_any_result_exits_1(run, tmp_path, capsys):
    code = main(["export", str(run), "--engine", "qdrant", "--backend", "faiss-ivf",
                 "--out", str(tmp_path / "x.yaml")])
    assert code == 1 and "HNSW results" in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()


def test_run_without_feasible_config_exits_1(tmp_path, capsys):
    spec = parse_spec({**SPEC, "indexes": [SPEC["indexes"][1]],
                       "tune": {"search_range": {"ef_search": [10, 10]}}})
    out = tmp_path / "run"
    run_sweep(apply_overrides(spec, strategy="target", target=1.0), out)
    capsys.readouterr()
    assert main(["export", str(out), "--engine", "hnswlib", "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "no config meeting target recall 1.0" in err and "hnswlib: no config meets" in err


def test_no_secret_reaches_the_file(run, tmp_path, monkeypatch):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    monkeypatch.setenv("RWB_MILVUS_TOKEN", "tok-hunter2-abc")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["command"] = ["rwb", "sweep", "--storage", "postgresql://bob:hunter2@db/x"]
    manifest["cpu"]["model"] = "Xeon tok-hunter2-abc"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    summary = json.loads((copy / "summary.json").read_text())
    summary["study"]["storage"] = "redis://:hunter2@cache:6379/0"
    (copy / "summary.json").write_text(json.dumps(summary))
    spec = yaml.safe_load((copy / "spec.yaml").read_text())
    spec["dataset"] = {"name": "synthetic-small",
                       "description": "copied from https://bob:hunter2@data.example/x.h5"}
    (copy / "spec.yaml").write_text(yaml.safe_dump(spec))
    for engine in NAMES:
        path = tmp_path / f"{engine}.json"
        assert main(["export", str(copy), "--engine", engine, "--out", str(path)]) == 0
        text = path.read_text()
        assert "hunter2" not in text and "bob" not in text, engine
    assert main(["verify", str(tmp_path / "hnswlib.json")]) == 0  # still verifiable


def test_eval_run_and_wrong_kind(tmp_path, capsys):
    spec = tmp_path / "e.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "indexes": [SPEC["indexes"][0]], "tune": {}}))
    assert main(["eval", str(spec), "--out", str(tmp_path / "ev"), "--json"]) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "ev"), "--engine", "faiss",
                 "--out", str(tmp_path / "x")]) == 1
    assert "has no tuned config" in capsys.readouterr().err
    assert main(["pareto", str(tmp_path / "ev"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_redisvl_engine_needs_a_cache_run(run, tmp_path, capsys):
    assert main(["export", str(run), "--engine", "redisvl", "--out", str(tmp_path / "x")]) == 2
    assert "semantic-cache threshold" in capsys.readouterr().err


def test_pareto_of_a_sweep(run, capsys):
    assert main(["pareto", str(run)]) == 0
    out = capsys.readouterr().out
    assert "Pareto front" in out and "p95_ms" in out


@pytest.mark.milvus
def test_milvus_round_trip_with_milvus_lite(tmp_path, capsys):
    spec = parse_spec({**SPEC, "indexes": [
        {"backend": "milvus", "build": {"index_type": "HNSW", "M": 8, "efConstruction": 40},
         "search": {"ef": 10}}],
        "tune": {"strategy": "target", "search_range": {"ef": [10, 64]}}})
    out = tmp_path / "run"
    run_sweep(spec, out)
    path = tmp_path / "m.yaml"
    assert main(["export", str(out), "--engine", "milvus", "--out", str(path)]) == 0
    doc = read_config(path)
    assert doc["config"]["index_type"] == "HNSW" and set(doc["config"]["params"]) == {
        "M", "efConstruction"}
    assert "ef" in doc["config"]["search_params"]["params"] and "note" not in doc["evidence"]
    capsys.readouterr()
    assert main(["verify", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "milvus"


def test_cache_runs_and_files_go_to_the_redisvl_exporter(tmp_path, capsys):
    run = tmp_path / "cache-run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"kind": "cache-tune"}))
    (run / "spec.yaml").write_text("name: cache\n")
    assert main(["export", str(run), "--engine", "faiss", "--out", str(tmp_path / "x")]) == 2
    assert "export it with --engine redisvl" in capsys.readouterr().err
    assert main(["export", str(run), "--engine", "redisvl", "--out", str(tmp_path / "x")]) == 2
    assert "summary.json" in capsys.readouterr().err  # the redisvl exporter read the run
    path = tmp_path / "cache.yaml"
    path.write_text(yaml.safe_dump({"kind": "cache-tune", "engine": "redisvl"}))
    assert main(["verify", str(path)]) == 2
    assert "semantic_cache" in capsys.readouterr().err  # the redisvl verifier read the file
