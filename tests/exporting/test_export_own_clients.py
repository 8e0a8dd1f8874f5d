"""Each engine's exported file, taken by that engine's OWN client (not by rwb's inverse): the
Qdrant create-collection body and search block through qdrant-edge's config objects on a real
shard; the Redis ``FT.CREATE`` / ``FT.SEARCH ... DIALECT 2`` lines through redis-py on the real
Redis; the pgvector SQL (``SET`` and ``SET LOCAL`` in a transaction) through psycopg on the real
PostgreSQL; the Milvus index and search params through pymilvus's own objects. Tiny data:
seconds."""

from __future__ import annotations

import shlex

import numpy as np
import pytest

from retrieval.exporting.engines import translate
from retrieval.exporting.files import read_config, write_config
from retrieval.exporting.portable import Hnsw

HNSW = Hnsw(M=8, ef_construction=40, ef_search=20)
DIM, N, K = 8, 200, 5


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(N, DIM)).astype(np.float32)


def exported(tmp_path, engine: str, metric: str = "l2") -> dict:
    """The ``config`` block as the user reads it from the written file."""
    path = write_config(tmp_path / f"{engine}.yaml", {"config": translate(engine, HNSW, metric,
                                                                           DIM, K)})
    return read_config(path)["config"]


def test_qdrant_edge_takes_the_collection_body_and_search_block(tmp_path, vectors):
    q = pytest.importorskip("qdrant_edge")
    cfg = exported(tmp_path, "qdrant")
    body, search = cfg["create_collection"], cfg["search"]["params"]
    assert "search_params" not in body and "optimizers_config" not in body
    v = body["vectors"]
    config = q.EdgeConfig(
        vectors=q.EdgeVectorParams(size=v["size"], distance=getattr(q.Distance, v["distance"]),
                                   on_disk=v["on_disk"]),
        # the body leaves full_scan_threshold to Qdrant (10000 KB); qdrant-edge wants it stated
        hnsw_config=q.HnswIndexConfig(**{"full_scan_threshold": 10000, **body["hnsw_config"]}),
        optimizers=q.EdgeOptimizersConfig(**cfg["measurement_settings"]["optimizers_config"]))
    shard = q.EdgeShard.create(str(tmp_path / "shard"), config)
    shard.update(q.UpdateOperation.upsert_points([q.Point(i, row)
                                                  for i, row in enumerate(vectors)]))
    shard.optimize()
    hits = shard.query(q.QueryRequest(limit=K, query=q.Query.Nearest(vectors[3]),
                                      params=q.SearchParams(**search)))
    assert hits[0].id == 3 and len(hits) == K


def _redis_args(line: str, blob: bytes | None = None) -> list:
    return [blob if w == "$BLOB" else w for w in shlex.split(line)]


def test_redis_py_runs_ft_create_and_the_dialect_2_search(tmp_path, vectors, redis_url):
    import redis

    cfg = exported(tmp_path, "redis")
    assert cfg["dialect"] == 2 and cfg["ft_search"].endswith("DIALECT 2")
    r = redis.Redis.from_url(redis_url, protocol=2)
    name = f"rwb-own-{tmp_path.name}"[:40]
    create = cfg["ft_create"].replace("FT.CREATE idx", f"FT.CREATE {name}").replace(
        "PREFIX 1 doc:", f"PREFIX 1 {name}:")
    r.execute_command(*_redis_args(create))
    try:
        pipe = r.pipeline(transaction=False)
        for i, row in enumerate(vectors):
            pipe.hset(f"{name}:{i}", mapping={"embedding": row.tobytes()})
        pipe.execute()
        line = cfg["ft_search"].replace("FT.SEARCH idx", f"FT.SEARCH {name}")
        reply = r.execute_command(*_redis_args(line, vectors[3].tobytes()))
        assert reply[0] == K and reply[1] == f"{name}:3".encode()
    finally:
        r.execute_command("FT.DROPINDEX", name, "DD")
        r.close()


def test_psycopg_runs_the_sql_and_set_local_on_postgresql(tmp_path, vectors, pg_url):
    import psycopg

    cfg = exported(tmp_path, "pgvector")
    table = f"items_{tmp_path.name[-8:].replace('-', '_')}".lower()
    sub = (lambda s: s.replace(" items ", f" {table} "))  # noqa: E731
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, embedding vector({DIM}))")
        try:
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {table} VALUES (%s, %s::vector)",
                                [(i, str(row.tolist())) for i, row in enumerate(vectors)])
            conn.execute(sub(cfg["create_index"]))
            query = sub(cfg["query"]).replace("$1", "%s::vector")
            probe = str(vectors[3].tolist())
            for line in cfg["set"]:
                conn.execute(line)
            assert conn.execute(query, (probe,)).fetchone()[0] == 3
            conn.execute("RESET hnsw.ef_search")
            lines = [sub(x).replace("$1", "%s::vector") for x in cfg["set_local"]["sql"]]
            assert lines[0] == "BEGIN;" and lines[-1] == "COMMIT;"
            for line in lines[:-1]:
                cur = conn.execute(line, (probe,) if "%s" in line else None)
                if "SELECT" in line:
                    assert cur.fetchone()[0] == 3
                    ef = conn.execute("SHOW hnsw.ef_search").fetchone()[0]
                    assert ef == str(HNSW.ef_search)  # in force inside the transaction
            conn.execute(lines[-1])
            assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] == "40"  # not leaked
        finally:
            conn.execute(f"DROP TABLE {table}")


def test_pymilvus_takes_the_index_and_search_params(tmp_path):
    pytest.importorskip("pymilvus")
    from pymilvus import MilvusClient

    cfg = exported(tmp_path, "milvus")
    index = MilvusClient.prepare_index_params()
    index.add_index(field_name="embedding", index_type=cfg["index_type"],
                    metric_type=cfg["metric_type"], params=cfg["params"])
    (made,) = list(index)
    assert made.index_type == "HNSW" and made.to_dict()["M"] == HNSW.M
    assert cfg["search_params"]["params"] == {"ef": HNSW.ef_search}


def test_lancedb_takes_the_create_index_arguments_and_the_query(tmp_path):
    lancedb = pytest.importorskip("lancedb")
    from lancedb.index import IvfHnswSq, IvfPq

    from retrieval.exporting.portable import Ivf

    rng = np.random.default_rng(1)
    base = rng.normal(size=(600, DIM)).astype(np.float32)  # >= 256 rows per partition
    ivf = Ivf(nlist=2, nprobe=2, encoding="pq", pq_m=4, pq_nbits=8, refine=True, k_factor=4)
    path = write_config(tmp_path / "lancedb.yaml",
                        {"config": translate("lancedb", ivf, "l2", DIM, K)})
    cfg = read_config(path)["config"]
    args, query = dict(cfg["create_index"]), cfg["query"]
    column, kind = args.pop("column"), args.pop("index_type")
    config = {"IVF_PQ": IvfPq, "IVF_HNSW_SQ": IvfHnswSq}[kind](**args)
    table = lancedb.connect(str(tmp_path / "db")).create_table(
        "items", data=[{"id": i, "vector": v.tolist()} for i, v in enumerate(base)])
    table.create_index(column, config=config)
    q = table.search(base[3]).distance_type(query["distance_type"]).nprobes(query["nprobes"])
    if query.get("refine_factor"):
        q = q.refine_factor(query["refine_factor"])
    hits = q.limit(K).to_list()
    assert len(hits) == K and hits[0]["id"] == 3
