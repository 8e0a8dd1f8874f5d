"""rwb drops on a shared server only what its own run created: a user's Redis index, its
documents and keys under a prefix survive `rwb tune cache` with that name (refused in one line);
a user's PostgreSQL table survives; what killed runs left (rwb-marked) is listed and removed by
`rwb services cleanup`, and nothing else. Real Redis 8 and real PostgreSQL + pgvector."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
import yaml

from retrieval.cache.live import SemanticCache
from retrieval.cache.owned import marker_key
from retrieval.cache.thresholds import Threshold
from retrieval.cli import main
from retrieval.errors import BackendError, ConfigError

DIM = 8


def _user_index(url: str, name: str, docs: int = 3) -> redis.Redis:
    """A user's own index (redisvl-like: prefix '<name>:') with documents."""
    client = redis.Redis.from_url(url)
    client.execute_command("FT.CREATE", name, "ON", "HASH", "PREFIX", 1, f"{name}:", "SCHEMA",
                           "prompt", "TEXT", "prompt_vector", "VECTOR", "FLAT", 6, "TYPE",
                           "FLOAT32", "DIM", DIM, "DISTANCE_METRIC", "COSINE")
    for i in range(docs):
        client.hset(f"{name}:{i}", mapping={
            "prompt": f"users question {i}",
            "prompt_vector": np.ones(DIM, dtype=np.float32).tobytes()})
    return client


def _index_docs(client: redis.Redis, name: str) -> int:
    return int(client.ft(name).info()["num_docs"])


def _pairs(path: Path) -> Path:
    rows = [{"a": f"how do I cook rice number {i}", "b": f"how to cook rice {i}",
             "duplicate": i % 2} for i in range(60)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(("name", "blocker"), [("llmcache", "index"), ("doc", "doc:1")])
def test_tune_cache_refuses_a_name_in_use_and_drops_nothing(redis_url, tmp_path, capsys, name,
                                                            blocker):
    client = redis.Redis.from_url(redis_url)
    tag = os.urandom(3).hex()
    name = f"{name}{tag}"
    if blocker == "index":
        _user_index(redis_url, name)
    else:
        client.hset(f"{name}:1", mapping={"title": "the user's document"})
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "t", "cache": {"name": name},
                                    "pairs": {"path": str(_pairs(tmp_path / "p.jsonl"))}}))
    try:
        code = main(["tune", "cache", str(spec), "--redis-url", redis_url, "--out",
                     str(tmp_path / "run")])
        err = capsys.readouterr().err
        assert code == 2
        assert err.count("\n") == 1 and "Traceback" not in err
        if blocker == "index":
            assert f"already has an index '{name}'" in err
            assert _index_docs(client, name) == 3
            assert client.hget(f"{name}:0", "prompt") == b"users question 0"
        else:
            assert f"already has keys under the prefix '{name}:' (e.g. '{name}:1')" in err
            assert client.hget(f"{name}:1", "title") == b"the user's document"
        assert client.get(marker_key(name)) is None
        assert not (tmp_path / "run").exists()
    finally:
        if blocker == "index":
            client.execute_command("FT.DROPINDEX", name, "DD")
        client.delete(f"{name}:1")


def test_an_exclusive_cache_drops_only_what_it_created(redis_url):
    client = redis.Redis.from_url(redis_url)
    name = f"rwb-own-{os.urandom(3).hex()}"
    thr = Threshold.distance(0.2)
    cache = SemanticCache(redis_url, thr, dim=DIM, name=name, exclusive=True)
    try:
        assert client.get(marker_key(name)) is not None
        vecs = np.random.default_rng(0).standard_normal((5, DIM)).astype(np.float32)
        assert cache.store_many([f"p{i}" for i in range(5)], [f"r{i}" for i in range(5)],
                                vecs) == 5
        # the same name again (a second run) is refused while the first holds it
        with pytest.raises(ConfigError, match="already holds an rwb marker"):
            SemanticCache(redis_url, thr, dim=DIM, name=name, exclusive=True)
        cache.drop()
    finally:
        cache.close()
    assert name.encode() not in client.execute_command("FT._LIST")
    assert list(client.scan_iter(match=f"{name}:*")) == []
    assert client.get(marker_key(name)) is None
    with pytest.raises(ConfigError, match="overwrite"):
        SemanticCache(redis_url, thr, dim=DIM, name=name, exclusive=True, overwrite=True)


def test_a_cache_whose_marker_was_taken_away_is_not_dropped(redis_url):
    """drop() of an exclusive cache needs its own run marker: an index re-created by someone
    else under the same name (the marker gone) is left alone."""
    client = redis.Redis.from_url(redis_url)
    name = f"rwb-lost-{os.urandom(3).hex()}"
    cache = SemanticCache(redis_url, Threshold.distance(0.2), dim=DIM, name=name,
                          exclusive=True)
    try:
        client.execute_command("FT.DROPINDEX", name, "DD")
        client.delete(marker_key(name))
        _user_index(redis_url, name)  # the user's, now
        cache.drop()
    finally:
        cache.close()
    try:
        assert _index_docs(client, name) == 3
    finally:
        client.execute_command("FT.DROPINDEX", name, "DD")


KILLED_REDIS = textwrap.dedent("""
    import sys, time
    import numpy as np
    from retrieval.cache.live import SemanticCache
    from retrieval.cache.thresholds import Threshold
    c = SemanticCache(sys.argv[1], Threshold.distance(0.2), dim=8, name=sys.argv[2],
                      exclusive=True)
    c.store_many(["a", "b"], ["x", "y"], np.eye(2, 8, dtype=np.float32))
    print("ready", flush=True)
    time.sleep(600)
""")

KILLED_PG = textwrap.dedent("""
    import sys, time
    import numpy as np
    from retrieval.indexes import create_index
    idx = create_index("pgvector", 8, "l2", {"m": 4, "ef_construction": 16})
    idx.build(np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32))
    print(idx.table, flush=True)
    time.sleep(600)
""")


def _killed(script: str, *args: str) -> str:
    """Run ``script`` until it prints its first line, then kill -9 it; that line."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip() if proc.stdout else ""
        assert line, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    return line


def _cleanup(*args: str, capsys) -> dict[str, Any]:
    assert main(["services", "cleanup", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cleanup_lists_and_removes_only_redis_leftovers(private_redis, capsys, monkeypatch):
    url = private_redis.url
    monkeypatch.delenv("RWB_PG_URL", raising=False)
    client = _user_index(url, "llmcache")
    client.set("doc:1", "mine")
    _killed(KILLED_REDIS, url, "dead-run")
    live = SemanticCache(url, Threshold.distance(0.2), dim=DIM, name="live-run",
                         exclusive=True)
    try:
        listed = _cleanup("--redis-url", url, capsys=capsys)
        state = {o["name"]: (o["alive"], o["removed"]) for o in listed["objects"]}
        assert state == {"dead-run": (False, False), "live-run": (True, False)}
        assert {o["keys"] for o in listed["objects"] if o["name"] == "dead-run"} == {2}
        removed = _cleanup("--redis-url", url, "--yes", capsys=capsys)
        assert removed["removed"] == 1
        assert b"dead-run" not in client.execute_command("FT._LIST")
        assert list(client.scan_iter(match="dead-run:*")) == []
        assert client.get(marker_key("dead-run")) is None
        assert b"live-run" in client.execute_command("FT._LIST")  # a running rwb's: kept
    finally:
        live.drop()
        live.close()
    assert _index_docs(client, "llmcache") == 3 and client.get("doc:1") == b"mine"
    assert _cleanup("--redis-url", url, capsys=capsys)["objects"] == []


def test_cleanup_keeps_keys_an_application_wrote_under_a_killed_runs_name(
        private_redis, capsys, monkeypatch):
    """Issue 34 HIGH 5: a killed ``tune cache`` run's name, then an application writes under
    it: ``cleanup --yes`` deletes the two entries the run recorded, never the application's."""
    url = private_redis.url
    monkeypatch.delenv("RWB_PG_URL", raising=False)
    client = redis.Redis.from_url(url)
    _killed(KILLED_REDIS, url, "dead-run")
    client.hset("dead-run:app-1", mapping={"prompt": "the application's own entry"})
    client.set("dead-run:app-2", "kept")
    listed = _cleanup("--redis-url", url, capsys=capsys)
    assert [(o["name"], o["keys"]) for o in listed["objects"]] == [("dead-run", 4)]
    removed = _cleanup("--redis-url", url, "--yes", capsys=capsys)
    assert removed["removed"] == 1
    left = sorted(k.decode() for k in client.scan_iter(match="dead-run:*"))
    assert left == ["dead-run:app-1", "dead-run:app-2"]
    assert client.get("dead-run:app-2") == b"kept"
    assert client.get(marker_key("dead-run")) is None
    assert b"dead-run" not in client.execute_command("FT._LIST")
    assert not [k for k in client.scan_iter(match="{rwb}*")]  # the record went too


KILLED_REDIS_INDEX = textwrap.dedent("""
    import sys, time
    import numpy as np
    from retrieval.indexes import create_index
    idx = create_index("redis", 8, "l2", {"M": 4, "EF_CONSTRUCTION": 16})  # at $REDIS_URL
    idx.build(np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32))
    print(idx.index_name, flush=True)
    time.sleep(600)
""")


def test_cleanup_lists_and_removes_a_killed_runs_redis_vector_index(private_redis, capsys,
                                                                     monkeypatch):
    from retrieval.indexes import create_index

    url = private_redis.url
    monkeypatch.delenv("RWB_PG_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", url)  # the killed child's too
    client = redis.Redis.from_url(url)
    mine = f"rwb_{os.urandom(6).hex()}"  # a user's index with a name like rwb's, no marker
    _user_index(url, mine)
    client.set(f"rwb_{os.urandom(6).hex()}:1", "the user's key")
    dead = _killed(KILLED_REDIS_INDEX)
    assert client.get(marker_key(dead)) is not None  # marked before it was created
    live = create_index("redis", DIM, "l2", {"M": 4, "EF_CONSTRUCTION": 16})
    live.build(np.ones((5, DIM), dtype=np.float32))
    try:
        listed = _cleanup("--redis-url", url, capsys=capsys)
        state = {o["name"]: (o["alive"], o["removed"], o["keys"]) for o in listed["objects"]}
        assert state == {dead: (False, False, 50), live.index_name: (True, False, 5)}
        removed = _cleanup("--redis-url", url, "--yes", capsys=capsys)
        assert removed["removed"] == 1
        names = {n.decode() for n in client.execute_command("FT._LIST")}
        assert dead not in names and live.index_name in names  # a running rwb's: kept
        assert list(client.scan_iter(match=f"{dead}:*")) == []
        assert client.get(marker_key(dead)) is None
    finally:
        live_name = live.index_name
        live.close()
    names = {n.decode() for n in client.execute_command("FT._LIST")}
    assert live_name not in names and client.get(marker_key(live_name)) is None
    assert _index_docs(client, mine) == 3  # the user's index and keys survive every step
    assert [k.decode() for k in client.scan_iter(match="rwb_*:1")
            if client.type(k) == b"string"] != []
    assert _cleanup("--redis-url", url, capsys=capsys)["objects"] == []


def test_pgvector_never_drops_a_table_it_did_not_create(pg_url):
    import psycopg

    from retrieval.indexes import create_index

    user = f"rwb_{os.urandom(6).hex()}"  # the user's, named like rwb's (no rwb marker)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {user} (id int)")
        conn.execute(f"INSERT INTO {user} VALUES (7)")
    idx = create_index("pgvector", DIM, "l2", {"m": 4, "ef_construction": 16})
    idx.table = user  # a name collision: the build must not take (nor later drop) it
    try:
        with pytest.raises(BackendError, match=r"create table failed.*already exists"):
            idx.build(np.zeros((10, DIM), dtype=np.float32))
    finally:
        idx.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute(f"SELECT id FROM {user}").fetchall() == [(7,)]
        conn.execute(f"DROP TABLE {user}")


def test_cleanup_lists_and_removes_only_pg_leftovers(pg_url, capsys, monkeypatch):
    import psycopg

    from retrieval.indexes import create_index

    monkeypatch.delenv("REDIS_URL", raising=False)
    user = f"rwb_{os.urandom(6).hex()}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS my_documents (id int)")
        conn.execute(f"CREATE TABLE {user} (id int)")
        conn.execute(f"COMMENT ON TABLE {user} IS 'the user''s'")
    dead = _killed(KILLED_PG)
    live = create_index("pgvector", DIM, "l2", {"m": 4, "ef_construction": 16})
    live.build(np.random.default_rng(1).standard_normal((30, DIM)).astype(np.float32))
    try:
        listed = _cleanup("--pg-url", pg_url, capsys=capsys)
        state = {o["name"]: o["alive"] for o in listed["objects"]}
        assert state[dead] is False and state[live.table] is True
        assert user not in state and "my_documents" not in state
        assert main(["services", "cleanup", "--pg-url", pg_url]) == 0
        text = capsys.readouterr()
        assert dead in text.out and "left over" in text.out and "--yes" in text.err
        removed = _cleanup("--pg-url", pg_url, "--yes", capsys=capsys)
        assert {o["name"] for o in removed["objects"] if o["removed"]} == {dead}
        with psycopg.connect(pg_url, autocommit=True) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        assert dead not in tables and live.table in tables
        assert {user, "my_documents"} <= tables
    finally:
        live.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {user}")
            conn.execute("DROP TABLE IF EXISTS my_documents")


def test_cleanup_without_a_server_is_one_line(monkeypatch, capsys):
    monkeypatch.delenv("RWB_PG_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["services", "cleanup"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "set RWB_PG_URL and/or REDIS_URL" in err


def test_milvus_marks_its_collection_and_never_takes_an_existing_one(tmp_path):
    """Milvus Lite: rwb's collection carries rwb's description; a collection of the name the
    build would take (someone else's) refuses the build and is not dropped by it."""
    pytest.importorskip("milvus_lite")
    from retrieval.engines.milvus.owned import MILVUS_PROPERTIES
    from retrieval.indexes import create_index

    x = np.random.default_rng(0).standard_normal((50, DIM)).astype(np.float32)
    idx = create_index("milvus", DIM, "l2", {"index_type": "FLAT"}, workdir=tmp_path / "a")
    try:
        idx.build(x)
        props = idx.connect().describe_collection(idx.collection)["properties"]
        assert props.items() >= MILVUS_PROPERTIES.items()
    finally:
        idx.close()
    idx = create_index("milvus", DIM, "l2", {"index_type": "FLAT"}, workdir=tmp_path / "b")
    try:
        client = idx.connect()
        client.create_collection(idx.collection, dimension=DIM)  # someone else's, same name
        with pytest.raises(BackendError, match="already has a collection 'rwb_"):
            idx.build(x)
        assert client.has_collection(idx.collection)
    finally:
        idx.close()
