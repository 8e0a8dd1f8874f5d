"""Quantized exports of Milvus and LanceDB (issue 23): a sweep with memory as the objective on
Milvus Lite HNSW_SQ / IVF_SQ8 (and LanceDB IVF_PQ with ``refine_factor``), ``rwb export`` to the
engine, the exported file taken by the engine's OWN client (pymilvus against Milvus Lite:
create collection + create_index with exactly the exported index params + search with exactly
the exported search params; lancedb: ``create_index`` + a query with ``refine_factor``), and
``rwb verify`` holding on it, bytes per vector included. Small synthetic data: seconds a build."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from retrieval.cli import main
from retrieval.exporting.files import read_config
from retrieval.groundtruth.exact import exact_knn
from retrieval.loaders.catalog import resolve_dataset
from retrieval.stats.metrics import recall_by_id
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep
from tests.helpers import export_cli, verify_json

K = 10



def _checks(report: dict) -> dict[str, dict]:
    return {c["check"]: c for c in report["file_checks"]}


# --- Milvus ------------------------------------------------------------------------------------
MILVUS = {
    "milvus-hnsw": {"index_type": "HNSW", "M": 8, "efConstruction": 40},
    "milvus-hnsw-sq": {"index_type": "HNSW_SQ", "M": 8, "efConstruction": 40},
    "milvus-ivf-sq8": {"index_type": "IVF_SQ8", "nlist": 16},
}


@pytest.fixture(scope="module")
def milvus_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("pymilvus", reason="pymilvus not installed (extra 'milvus')")
    pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")
    spec = parse_spec({
        "name": "milvus-quantized", "dataset": "synthetic-small", "k": K, "warmup": 2,
        "batch_repeats": 1, "target_recall": 0.9, "index_build": {"threads": 1},
        "indexes": [{"backend": "milvus", "label": label, "build": build,
                     "search": {"nprobe": 1} if "nlist" in build else {"ef": 10}}
                    for label, build in MILVUS.items()],
        "tune": {"strategy": "target", "objective": "bytes_per_vector",
                 "search_range": {"ef": [10, 128], "nprobe": [1, 16]}},
    }, source="milvus-quantized.yaml")
    out = tmp_path_factory.mktemp("milvus") / "run"
    run_sweep(spec, out)
    return out


@pytest.mark.milvus
@pytest.mark.slow  # a three-build Milvus Lite sweep, two verifies, two own-client builds
@pytest.mark.parametrize(("label", "knob"), [("milvus-hnsw-sq", "ef"),
                                            ("milvus-ivf-sq8", "nprobe")])
def test_milvus_quantized_export_taken_by_pymilvus_and_verified(
        milvus_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str,
        knob: str) -> None:
    from pymilvus import DataType, MilvusClient

    summary = json.loads((milvus_run / "summary.json").read_text())
    bpv = {lab: summary["backends"][lab]["chosen"]["bytes_per_vector"] for lab in MILVUS}
    # measured from Milvus Lite's own index files: 1 byte a dimension instead of 4
    assert bpv[label] < bpv["milvus-hnsw"] - 2 * 32  # synthetic-small: 32 dimensions
    path = export_cli(milvus_run, tmp_path, "milvus", label)
    doc = read_config(path)
    cfg, ev = doc["config"], doc["evidence"]
    build = MILVUS[label]
    assert cfg["index_type"] == build["index_type"] and cfg["metric_type"] == "L2"
    assert {k: v for k, v in cfg["params"].items() if k != "sq_type"} == {
        k: v for k, v in build.items() if k != "index_type"}
    assert set(cfg["search_params"]["params"]) == {knob}
    assert ev["bytes_per_vector"] == pytest.approx(bpv[label], abs=0.05)
    assert ev["memory"]["resident_source"].startswith("Milvus Lite index files")
    assert ev["memory"]["flags"] == [] and "SQ8" in ev["memory"]["encoding"]

    # pymilvus against a Milvus Lite of this test's own, with exactly the exported params
    ds = resolve_dataset("synthetic-small")
    client = MilvusClient(str(tmp_path / "own.db"))
    try:
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=ds.dim)
        client.create_collection("items", schema=schema)
        client.insert("items", [{"id": i, "embedding": v} for i, v in enumerate(ds.base)])
        client.flush("items")
        index = client.prepare_index_params()
        # nested: Milvus Lite 3.2 silently drops flat params (a server takes both forms)
        index.add_index(field_name="embedding", index_type=cfg["index_type"],
                        metric_type=cfg["metric_type"], params={"params": cfg["params"]})
        client.create_index("items", index)
        client.release_collection("items")
        client.load_collection("items")
        held = client.describe_index("items", "embedding")
        assert held["index_type"] == cfg["index_type"] and held["params"] == cfg["params"]
        hits = client.search("items", data=list(ds.queries), limit=K, anns_field="embedding",
                             output_fields=["id"], search_params=cfg["search_params"])
        ids = np.array([[h["id"] for h in row] for row in hits])
        exact = exact_knn(ds.base, ds.queries, "l2", K, threads=1).ids
        own = float(recall_by_id(ids, exact, K).mean())
        # a fresh build of the same params recalls like the evidence (a brute-force fallback
        # would give 1.0 at the chosen knob, a dropped param would move it)
        assert abs(own - ev["recall"]) <= 0.05, (own, ev["recall"])
    finally:
        client.close()

    code, report = verify_json(capsys, path)
    checks = _checks(report)
    assert checks["evidence.bytes_per_vector"]["passed"], checks["evidence.bytes_per_vector"]
    assert "memory doctor" not in checks
    assert report["holds"] and code == 0, report


@pytest.mark.milvus
@pytest.mark.slow
@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["config"].update(index_type="IVF_FLAT"), "config.index_type"),
    (lambda d: d["evidence"].update(bytes_per_vector=4 * d["evidence"]["bytes_per_vector"]),
     "evidence.bytes_per_vector"),
])
def test_milvus_edited_quantized_export_fails_naming_the_field(
        milvus_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any,
        field: str) -> None:
    path = export_cli(milvus_run, tmp_path, "milvus", "milvus-ivf-sq8")
    doc = yaml.safe_load(path.read_text())
    edit(doc)  # float vectors instead of SQ8 codes; bytes the index does not hold
    path.write_text(yaml.safe_dump(doc))
    code, report = verify_json(capsys, path)
    assert code == 1 and not report["holds"]
    failed = [f for c in report["file_checks"] if not c["passed"] for f in c["fields"]]
    assert failed == [field], report["file_checks"]


# --- LanceDB -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lance_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """IVF_PQ with ``refine_factor`` solved jointly with ``nprobes``, memory as the objective.
    A build cache of this module's own: LanceDB builds are unseeded, so verify re-measures the
    sweep's own index loaded from it (as tests/engines/test_lancedb.py does)."""
    pytest.importorskip("lancedb", reason="lancedb not installed (extra 'lancedb')")
    spec = parse_spec({
        "name": "lancedb-quantized", "dataset": "synthetic-small", "k": K, "warmup": 2,
        "batch_repeats": 1, "target_recall": 0.9,
        "indexes": [{"backend": "lancedb-ivfpq",
                     "build": {"num_partitions": 8, "num_sub_vectors": 8},
                     "search": {"nprobes": 1, "refine_factor": 1}}],
        "tune": {"strategy": "target", "objective": "bytes_per_vector",
                 "rescore_knobs": {"lancedb-ivfpq": "refine_factor"},
                 "search_range": {"nprobes": [1, 8], "refine_factor": [1, 16]}},
    }, source="lancedb-quantized.yaml")
    out = tmp_path_factory.mktemp("lancedb") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RWB_INDEX_CACHE_DIR", str(tmp_path_factory.mktemp("lance-index-cache")))
        mp.delenv("RWB_INDEX_CACHE", raising=False)
        run_sweep(spec, out)
        yield out


@pytest.mark.slow  # a LanceDB sweep (two knobs), a verify, an own-client build
def test_lancedb_ivfpq_refine_export_taken_by_lancedb_and_verified(
        lance_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import lancedb
    from lancedb.index import IvfPq

    summary = json.loads((lance_run / "summary.json").read_text())
    chosen = summary["backends"]["lancedb-ivfpq"]["chosen"]
    assert set(chosen["search"]) == {"nprobes", "refine_factor"}
    searched = {r["search"]["refine_factor"] for r in summary["rows"]}
    assert len(searched) >= 2 or chosen["search"]["refine_factor"] == 1  # solved, not fixed
    # PQ8x8 codes + row ids + codebooks: far below the 128 bytes of a float32 vector
    assert chosen["bytes_per_vector"] < 0.5 * 4 * 32
    path = export_cli(lance_run, tmp_path, "lancedb", "lancedb-ivfpq")
    doc = read_config(path)
    cfg, ev = doc["config"], doc["evidence"]
    assert cfg["create_index"]["index_type"] == "IVF_PQ"
    assert cfg["query"]["refine_factor"] == chosen["search"]["refine_factor"]
    assert cfg["query"]["nprobes"] == chosen["search"]["nprobes"]
    mem = ev["memory"]
    assert mem["resident_source"].startswith("LanceDB index files")
    assert mem["refine_store"] == "disk" and mem["flags"] == []
    assert ev["bytes_per_vector"] == pytest.approx(chosen["bytes_per_vector"], abs=0.05)

    # lancedb's own client: create_index with exactly the exported arguments, the exported query
    ds = resolve_dataset("synthetic-small")
    args = dict(cfg["create_index"])
    column, _kind = args.pop("column"), args.pop("index_type")
    table: Any = lancedb.connect(str(tmp_path / "own")).create_table(
        "items", data=[{"id": i, "vector": v.tolist()} for i, v in enumerate(ds.base)])
    table.create_index(column, config=IvfPq(**args))
    q = cfg["query"]
    ids = np.array([[h["id"] for h in table.search(v).distance_type(q["distance_type"])
                     .nprobes(q["nprobes"]).refine_factor(q["refine_factor"]).limit(K)
                     .to_list()] for v in ds.queries])
    exact = exact_knn(ds.base, ds.queries, "l2", K, threads=1).ids
    own = float(recall_by_id(ids, exact, K).mean())
    assert abs(own - ev["recall"]) <= 0.1, (own, ev["recall"])  # unseeded k-means: a margin

    code, report = verify_json(capsys, path)
    checks = _checks(report)
    assert checks["evidence.bytes_per_vector"]["passed"], checks["evidence.bytes_per_vector"]
    assert "memory doctor" not in checks
    assert report["holds"] and code == 0, report


@pytest.mark.slow
def test_lancedb_refine_factor_below_1_is_one_line(
        lance_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # in an exported file, through rwb verify
    path = export_cli(lance_run, tmp_path, "lancedb", "lancedb-ivfpq")
    doc = yaml.safe_load(path.read_text())
    doc["config"]["query"]["refine_factor"] = 0
    path.write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "field 'config.query.refine_factor'" in err, err
    assert ">= 1" in err and "received 0" in err, err


def test_lancedb_refine_factor_below_1_in_a_sweep_spec_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("lancedb", reason="lancedb not installed (extra 'lancedb')")
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "rf", "dataset": "synthetic-small", "k": K,
        "indexes": [{"backend": "lancedb-ivfpq",
                     "build": {"num_partitions": 8, "num_sub_vectors": 8},
                     "search": {"nprobes": 1, "refine_factor": [0, 4]}}]}))
    capsys.readouterr()
    assert main(["sweep", str(spec), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refine_factor" in err, err
    assert ">= 1" in err and "received 0" in err, err
    assert not (tmp_path / "run" / "summary.json").exists()


# --- pgvector bit + re-rank query --------------------------------------------------------------
@pytest.fixture(scope="module")
def pg_bit_run(tmp_path_factory: pytest.TempPathFactory, pg_url: str
               ) -> Iterator[tuple[Path, dict]]:
    """A pgvector HNSW over ``binary_quantize(embedding)::bit(64)`` beside the float32 one,
    ``oversample`` solved jointly with ``ef_search``, memory as the objective, on .npy data
    (cosine; 300 clusters of 10, a query near a cluster's centre: 64 sign bits find most of
    its 10 neighbours, a re-rank of 2-4x more candidates the rest)."""
    tmp = tmp_path_factory.mktemp("pgbit")
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((300, 64)).astype(np.float32)
    base = (np.repeat(centres, 10, axis=0)
            + 0.8 * rng.standard_normal((3000, 64))).astype(np.float32)
    queries = (centres[rng.choice(300, 100, replace=False)]
               + 0.3 * rng.standard_normal((100, 64))).astype(np.float32)
    np.save(tmp / "base.npy", base)
    np.save(tmp / "queries.npy", queries)
    spec = parse_spec({
        "name": "pgvector-bit", "k": K, "warmup": 2, "batch_repeats": 1, "target_recall": 0.9,
        "dataset": {"kind": "npy", "base": str(tmp / "base.npy"),
                    "queries": str(tmp / "queries.npy"), "metric": "cosine"},
        "indexes": [
            {"backend": "pgvector", "label": "pg-float",
             "build": {"m": 16, "ef_construction": 64}, "search": {"ef_search": 10}},
            {"backend": "pgvector", "label": "pg-bit",
             "build": {"m": 16, "ef_construction": 64, "vector_type": "bit"},
             "search": {"ef_search": 40, "oversample": 1}},
        ],
        "tune": {"strategy": "target", "objective": "bytes_per_vector",
                 "rescore_knobs": {"pg-bit": "oversample"},
                 "search_range": {"ef_search": [40, 400], "oversample": [1, 16]}},
    }, source="pgvector-bit.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RWB_PG_URL", pg_url)
        run_sweep(spec, tmp / "run")
        yield tmp / "run", {"base": base, "queries": queries}


@pytest.mark.pgvector
@pytest.mark.slow  # two PostgreSQL builds, a two-knob search, a verify, an own-client build
def test_pgvector_bit_rerank_export_taken_by_psycopg_and_verified(
        pg_bit_run: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    run, data = pg_bit_run
    summary = json.loads((run / "summary.json").read_text())
    chosen = {lab: summary["backends"][lab]["chosen"] for lab in ("pg-float", "pg-bit")}
    assert set(chosen["pg-bit"]["search"]) == {"ef_search", "oversample"}
    # measured by pg_relation_size: one bit a dimension instead of 4 bytes (the links stay)
    assert chosen["pg-bit"]["bytes_per_vector"] < chosen["pg-float"]["bytes_per_vector"] - 150
    path = export_cli(run, tmp_path, "pgvector", "pg-bit")
    doc = read_config(path)
    cfg, ev = doc["config"], doc["evidence"]
    over = chosen["pg-bit"]["search"]["oversample"]
    assert cfg["vector_type"] == "bit" and cfg["opclass"] == "bit_hamming_ops"
    assert cfg["search_params"] == chosen["pg-bit"]["search"]
    assert f"LIMIT {K * over}) c ORDER BY embedding <=> $1 LIMIT {K};" in cfg["query"]
    assert ev["memory"]["refine_store"] == "disk" and ev["memory"]["flags"] == []

    # psycopg on the real PostgreSQL: the file's CREATE INDEX, SET lines and re-rank query
    table = f"items_{tmp_path.name[-8:].replace('-', '_')}".lower()
    sub = (lambda s: s.replace(" items ", f" {table} "))  # noqa: E731
    base, queries = data["base"], data["queries"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, embedding vector(64))")
        try:
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {table} VALUES (%s, %s::vector)",
                                [(i, str(row.tolist())) for i, row in enumerate(base)])
            conn.execute(sub(cfg["create_index"]))
            conn.execute("SET enable_seqscan = off")
            for line in cfg["set"]:
                conn.execute(line)
            query = sub(cfg["query"]).replace("$1", "%(q)s::vector")
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN " + query, {"q": str(queries[0].tolist())}).fetchall())
            assert "Index Scan" in plan, plan  # the binary index answers the inner query
            ids = np.array([[r[0] for r in conn.execute(query, {"q": str(v.tolist())})]
                            for v in queries])
        finally:
            conn.execute(f"DROP TABLE {table}")
    exact = exact_knn(base, queries, "cosine", K, threads=1).ids
    own = float(recall_by_id(ids, exact, K).mean())
    assert abs(own - ev["recall"]) <= 0.05, (own, ev["recall"])

    monkeypatch.setenv("RWB_PG_URL", pg_url)
    code, report = verify_json(capsys, path)
    checks = _checks(report)
    assert checks["evidence.bytes_per_vector"]["passed"], checks["evidence.bytes_per_vector"]
    assert report["holds"] and code == 0, (report["measured"], report["file_checks"])


@pytest.mark.pgvector
@pytest.mark.slow
def test_pgvector_bit_edited_oversample_fails_naming_the_query(
        pg_bit_run: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = pg_bit_run
    path = export_cli(run, tmp_path, "pgvector", "pg-bit")
    doc = yaml.safe_load(path.read_text())
    cfg = doc["config"]
    over = cfg["search_params"]["oversample"]
    # a re-rank depth that is not a multiple of k: refused in one line before any build
    cfg["query"] = cfg["query"].replace(f"LIMIT {K * over})", f"LIMIT {K * over + 3})")
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("RWB_PG_URL", pg_url)
    capsys.readouterr()
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "field 'config.query inner LIMIT'" in err, err


def test_pgvector_oversample_needs_a_bit_build() -> None:
    from retrieval.engines.pgvector.hnsw import PgVectorHnsw
    from retrieval.engines.pgvector.params import PgHnswBuild, PgHnswSearch
    from retrieval.errors import ConfigError

    with pytest.raises(ConfigError, match=r"field 'oversample' must be 1 or unset unless "
                                          r"vector_type is bit.*received 4"):
        PgVectorHnsw.check_combination(PgHnswBuild(), PgHnswSearch(oversample=4), K)
    PgVectorHnsw.check_combination(PgHnswBuild(vector_type="bit"), PgHnswSearch(oversample=4), K)
    PgVectorHnsw.check_combination(PgHnswBuild(), PgHnswSearch(oversample=1), K)  # a no-op
    from retrieval.params import validate_params

    with pytest.raises(ConfigError, match=r"field 'oversample' must be >= 1; received 0"):
        validate_params(PgHnswSearch, {"oversample": 0}, where="pgvector")
