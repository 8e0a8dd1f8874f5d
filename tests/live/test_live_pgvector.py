"""A live pgvector collection, attached read-only (issue 30): describe, refusals, exact ground
truth both ways, tuning in place with a SELECT-only role, export + verify from another folder,
and the read-only proof (rows, a checksum of the vectors, index definitions, the schema's
relations: identical before and after every command, a SIGKILLed sweep included).

The collection is created here through psycopg: 3,000 x 16 random vectors, ids
1_000_000 + 7*i (never row numbers), an HNSW index with m 4 / ef_construction 16 so that recall
moves with hnsw.ef_search.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pytest
import yaml

pytest.importorskip("psycopg", reason="psycopg not installed (extra 'pgvector')")
pytest.importorskip("pgvector", reason="pgvector not installed (extra 'pgvector')")

from retrieval.cli import main
from retrieval.errors import ConfigError, NotReachable
from retrieval.live import attach
from retrieval.live.pace import Pacer
from retrieval.live.spec import BudgetSpec
from retrieval.live.truth import Snapshot, engine_truth, snapshot_truth
from retrieval.tune.decide import split_queries
from tests.helpers import caller_ids, pg_collection_state, rwb

pytestmark = [pytest.mark.slow, pytest.mark.pgvector]

N, DIM, K = 3000, 16, 10
PASSWORD = "Zq8-live-secret-7731"



def _brute(x: np.ndarray, q: np.ndarray, k: int = K) -> np.ndarray:
    d = ((q[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return caller_ids(x.shape[0])[np.argsort(d, axis=1, kind="stable")[:, :k]]


@pytest.fixture(scope="module")
def coll(pg_url: str):
    """The user's collection and a SELECT-only role (dropped at the end)."""
    import psycopg
    from pgvector.psycopg import register_vector

    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    table = f"live_items_{uuid.uuid4().hex[:8]}"
    role = f"rwb_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute(f"CREATE TABLE {table} (item_id bigint PRIMARY KEY, emb vector({DIM}), "
                     f"note text)")
        with conn.cursor().copy(f"COPY {table} (item_id, emb, note) FROM STDIN "
                                f"(FORMAT BINARY)") as cp:
            cp.set_types(["int8", "vector", "text"])
            for i, v in zip(caller_ids(N), x):
                cp.write_row((int(i), v, "n"))
        conn.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (emb vector_l2_ops) "
                     f"WITH (m = 4, ef_construction = 16)")
        conn.execute(f"ANALYZE {table}")
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        conn.execute(f"GRANT SELECT ON {table} TO {role}")
    parts = urlsplit(pg_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    reader = urlunsplit((parts.scheme, f"{role}:{PASSWORD}@{host}", parts.path, "", ""))
    yield {"url": pg_url, "reader": reader, "table": table, "x": x, "role": role}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE IF EXISTS {role}")



def section(coll: dict, **over) -> dict:
    return {"engine": "pgvector", "dsn": coll["url"], "table": coll["table"],
            "vector_column": "emb", "id_column": "item_id", **over}


def write_spec(path: Path, coll: dict, queries: dict, **extra) -> Path:
    spec = {"name": "live-test",
            "live": {"engine": "pgvector", "dsn": "${RWB_LIVE_DSN}", "table": coll["table"],
                     "vector_column": "emb", "id_column": "item_id"},
            "queries": queries, "k": K, "target_recall": 0.9,
            "budget": {"max_qps": 5000}, **extra}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path



# --- attach ------------------------------------------------------------------------------------
def test_attach_describes_from_the_catalog_and_searches(coll):
    before = pg_collection_state(coll)
    col = attach(section(coll), "t.yaml")
    try:
        d = col.describe()
        assert (d.engine, d.dim, d.metric, d.index_kind, d.rows) == ("pgvector", DIM, "l2",
                                                                      "hnsw", N)
        assert dict(d.build_params) == {"m": 4, "ef_construction": 16}
        assert d.details["index_name"] == f"{coll['table']}_hnsw"
        assert [k.native for k in col.knobs()] == ["hnsw.ef_search"]
        q = np.random.default_rng(1).standard_normal((20, DIM)).astype(np.float32)
        truth = _brute(coll["x"], q)
        exact = col.search_exact(q, K)
        assert (exact.ids == truth).all()  # the collection's own ids, exact order
        recalls = []
        for ef in (1, 16, 400):
            col.set_search_params(ef_search=ef)
            got = col.search(q, K).ids
            recalls.append(np.mean([len(set(a) & set(b)) / K for a, b in zip(got, truth)]))
        assert recalls[0] < recalls[1] < recalls[2]  # the index, not a silent exact scan
        with pytest.raises(ConfigError, match="ef_search"):
            col.set_search_params(ef_search=0)
        with pytest.raises(ConfigError, match="probes"):
            col.set_search_params(probes=3)
        assert col._run("show", "SHOW transaction_read_only") == [("on",)]  # every statement
    finally:
        col.close()
    assert pg_collection_state(coll) == before


@pytest.mark.parametrize("over, field", [
    ({"table": "no_such_table"}, "live.table"),
    ({"vector_column": "embedding"}, "live.vector_column"),
    ({"id_column": "note"}, "live.id_column"),
    ({"metric": "cosine"}, "live.metric"),
    ({"colour": "red"}, "colour"),
    ({"where": "1 = 1; COMMIT"}, "live.where"),
])
def test_refusals_exit_2_in_one_line(coll, tmp_path, capsys, over, field):
    spec = {"live": section(coll, **over), "queries": {"sample": 5}, "k": K}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["sweep", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err, err
    assert not (tmp_path / "run" / "summary.json").exists()


def test_query_dimension_mismatch_exit_2(coll, tmp_path, capsys):
    np.save(tmp_path / "q.npy", np.zeros((4, DIM + 1), dtype=np.float32))
    spec = {"live": section(coll), "queries": {"log": "q.npy"}, "k": K}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "q.npy" in err and f"{DIM}-dimensional" in err and f"{DIM + 1}" in err


def test_unreachable_and_refused_exit_3(coll, tmp_path, capsys):
    parts = urlsplit(coll["reader"])
    dead = urlunsplit((parts.scheme, f"{coll['role']}:{PASSWORD}@127.0.0.1:1", parts.path,
                       "", ""))
    nobody = coll["reader"].replace(coll["role"], "no_such_role_x")
    for dsn in (dead, nobody):
        spec = {"live": section(coll, dsn=dsn), "queries": {"sample": 5}, "k": K}
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
        assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "r")]) == 3
        err = capsys.readouterr().err
        assert "not measurable here" in err and PASSWORD not in err
    with pytest.raises(NotReachable):
        attach(section(coll, dsn=dead))


# --- exact ground truth both ways ------------------------------------------------------------
class _Dies:
    """The collection, whose snapshot stream breaks after ``after`` batches (a killed COPY)."""

    def __init__(self, col, after: int) -> None:
        self.col, self.after = col, after

    def __getattr__(self, name):
        return getattr(self.col, name)

    def iter_vectors(self, batch: int = 10_000, start: int = 0):
        for i, item in enumerate(self.col.iter_vectors(batch=batch, start=start)):
            if i == self.after:
                raise OSError("killed")
            yield item


def test_exact_ground_truth_both_ways_equal(coll, tmp_path):
    before = pg_collection_state(coll)
    q = np.random.default_rng(3).standard_normal((25, DIM)).astype(np.float32)
    col = attach(section(coll, dsn=coll["reader"]))
    try:
        a = engine_truth(col, q, K, Pacer(BudgetSpec(max_qps=10_000)))
        with pytest.raises(OSError):
            Snapshot(tmp_path, _Dies(col, 2)).take(batch=500)  # type: ignore[arg-type]
        snap = Snapshot(tmp_path, col)
        info = snap.take(batch=500)
        assert info.resumed_at == 1000 and info.rows == N  # resumed where it broke
        b = snapshot_truth(snap, q, K)
        fresh = Snapshot(tmp_path / "again", col).take(batch=700)
        assert fresh.fingerprint == info.fingerprint and fresh.resumed_at == 0
        assert fresh.rows_per_s > 0
    finally:
        col.close()
    assert (a.ids == b.ids).all() and (a.ids == _brute(coll["x"], q)).all()
    np.testing.assert_allclose(a.distances, b.distances, rtol=1e-5)
    assert pg_collection_state(coll) == before


# --- tune in place, export, verify ------------------------------------------------------------
def _files_text(root: Path) -> str:
    out = []
    for p in root.rglob("*"):
        if p.is_file():
            out.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


def test_sweep_in_place_export_verify_with_a_select_only_role(coll, tmp_path):
    before = pg_collection_state(coll)
    rng = np.random.default_rng(11)
    q = rng.standard_normal((40, DIM)).astype(np.float32)
    with (tmp_path / "prod.jsonl").open("w") as fh:
        for i, v in enumerate(q):
            fh.write(json.dumps({"id": f"q{i}", "ts": 1000 + i, "vector": v.tolist()}) + "\n")
    spec = write_spec(tmp_path / "live.yaml", coll, {"log": "prod.jsonl"},
                      heldout_fraction=0.0, ground_truth={"method": "snapshot", "batch": 1000})
    swept = rwb("sweep", str(spec), "--out", str(tmp_path / "run"), "--json", cwd=tmp_path,
                env={"RWB_LIVE_DSN": coll["reader"]})
    assert swept.returncode == 0, swept.stderr
    s = json.loads(swept.stdout)
    assert s["kind"] == "live-sweep" and s["live"]["not_production_traffic"] is False
    chosen = s["chosen"]
    ef = chosen["search"]["ef_search"]
    assert chosen["native"] == {"hnsw.ef_search": ef} and chosen["recall_lb"] >= 0.9
    assert s["live"]["snapshot"]["rows"] == N and s["live"]["snapshot"]["rows_per_s"] > 0
    assert s["live"]["spent"]["live_queries"] > 0
    # the chosen recall, recomputed against a numpy brute force on the same tuning queries
    split = split_queries(40, 0.0, 0)  # every query tunes: verify re-measures the same mean
    truth = _brute(coll["x"], q)
    col = attach(section(coll))
    try:
        col.set_search_params(ef_search=ef)
        got = col.search(q[split.tune], K).ids
        if ef > 1:  # the rule: the smallest value meeting the lower bound
            below = [p for p in s["probes"] if p["kind"] == "probe"
                     and p["search"]["ef_search"] == ef - 1]
            assert below and below[0]["meets"] is False
    finally:
        col.close()
    rec = np.mean([len(set(a) & set(b)) / K for a, b in zip(got, truth[split.tune])])
    assert rec == pytest.approx(chosen["recall"], abs=1e-9)
    # export, then verify from another folder against the live collection
    other = tmp_path / "elsewhere"
    other.mkdir()
    exp = rwb("export", str(tmp_path / "run"), "--engine", "pgvector", "--out",
              str(other / "pg.yaml"), cwd=tmp_path, env={"RWB_LIVE_DSN": coll["reader"]})
    assert exp.returncode == 0, exp.stderr
    doc = yaml.safe_load((other / "pg.yaml").read_text())
    assert doc["settings"] == {"hnsw.ef_search": ef} and doc["live"]["dsn"] == "${RWB_LIVE_DSN}"
    ver = rwb("verify", "pg.yaml", cwd=other, env={"RWB_LIVE_DSN": coll["reader"]})
    assert ver.returncode == 0 and "HOLDS" in ver.stdout, ver.stdout + ver.stderr
    parts = urlsplit(coll["reader"])
    dead = urlunsplit((parts.scheme, f"{coll['role']}:{PASSWORD}@127.0.0.1:1", parts.path,
                       "", ""))
    gone = rwb("verify", "pg.yaml", cwd=other, env={"RWB_LIVE_DSN": dead})
    assert gone.returncode == 3 and "NOT MEASURABLE" in gone.stdout
    for proc in (swept, exp, ver, gone):
        assert PASSWORD not in proc.stdout + proc.stderr
    assert PASSWORD not in _files_text(tmp_path)
    assert pg_collection_state(coll) == before


def test_sample_queries_are_labelled_not_production(coll, tmp_path):
    spec = write_spec(tmp_path / "live.yaml", coll, {"sample": 30}, heldout_fraction=0.3,
                      budget={"max_qps": 5000, "concurrency": 2})  # two connections
    out = rwb("sweep", str(spec), "--out", str(tmp_path / "run"), cwd=tmp_path,
              env={"RWB_LIVE_DSN": coll["reader"]})
    assert out.returncode == 0, out.stderr
    assert "NOT PRODUCTION TRAFFIC" in out.stdout
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["live"]["not_production_traffic"] is True and "not production" in s["live"]["label"]
    assert s["queries"] == {"tuning": 21, "heldout": 9, "seed": 0, "source": s["queries"][
        "source"], "not_production_traffic": True}
    assert s["chosen"] is None or isinstance(s["heldout_meets"], bool)
    exp = rwb("export", str(tmp_path / "run"), "--engine", "pgvector", "--out",
              str(tmp_path / "pg.yaml"), cwd=tmp_path, env={"RWB_LIVE_DSN": coll["reader"]})
    assert exp.returncode == 0, exp.stderr
    assert yaml.safe_load((tmp_path / "pg.yaml").read_text())["evidence"][
        "not_production_traffic"] is True


def test_killed_sweep_leaves_the_collection_unchanged(coll, tmp_path):
    before = pg_collection_state(coll)
    np.save(tmp_path / "q.npy", np.random.default_rng(5).standard_normal((200, DIM))
            .astype(np.float32))
    spec = write_spec(tmp_path / "live.yaml", coll, {"log": "q.npy"},
                      budget={"max_qps": 40}, ground_truth={"method": "snapshot",
                                                             "batch": 500})
    env = {**os.environ, "RWB_LIVE_DSN": coll["reader"], "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.Popen([sys.executable, "-m", "retrieval", "sweep", str(spec), "--out",
                             str(tmp_path / "run")], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        manifest = tmp_path / "run" / "manifest.json"
        while not manifest.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        time.sleep(3.0)  # mid-way: paced searches in flight
        assert proc.poll() is None, "the sweep ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert pg_collection_state(coll) == before


def test_tenant_where_and_iterative_scan(coll):
    before = pg_collection_state(coll)
    col = attach(section(coll, where="item_id % 2 = 1", dsn=coll["reader"]))
    try:
        assert col.describe().rows == N // 2
        q = np.random.default_rng(9).standard_normal((10, DIM)).astype(np.float32)
        odd = np.arange(N) % 2 == 1
        d = ((q[:, None, :] - coll["x"][None, odd]) ** 2).sum(-1)
        truth = caller_ids(N)[odd][np.argsort(d, axis=1, kind="stable")[:, :K]]
        assert (col.search_exact(q, K).ids == truth).all()
        col.set_search_params(ef_search=10, iterative_scan="relaxed_order")
        got = col.search(q, K).ids
        assert (got >= 0).all() and (got % 2 == 1).all()  # k rows, all of the tenant
        ids = np.concatenate([i for i, _ in col.iter_vectors(batch=400)])
        assert (ids == caller_ids(N)[odd]).all()
    finally:
        col.close()
    assert pg_collection_state(coll) == before


def test_ivfflat_and_partitions_are_described(pg_url):
    import psycopg
    from pgvector.psycopg import register_vector

    x = np.random.default_rng(2).standard_normal((1200, 8)).astype(np.float32)
    t, p = f"live_ivf_{uuid.uuid4().hex[:6]}", f"live_part_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v vector(8))")
        conn.execute(f"CREATE TABLE {p} (id bigint, v vector(8)) PARTITION BY RANGE (id)")
        conn.execute(f"CREATE TABLE {p}_a PARTITION OF {p} FOR VALUES FROM (0) TO (600)")
        conn.execute(f"CREATE TABLE {p}_b PARTITION OF {p} FOR VALUES FROM (600) TO (2000)")
        for name in (t, p):
            with conn.cursor().copy(f"COPY {name} (id, v) FROM STDIN") as cp:
                for i, v in enumerate(x):
                    cp.write_row((5000 + 11 * i if name == t else i, v))
        conn.execute(f"CREATE INDEX ON {t} USING ivfflat (v vector_cosine_ops) "
                     f"WITH (lists = 20)")
        conn.execute(f"CREATE INDEX ON {p} USING hnsw (v vector_ip_ops)")
        conn.execute(f"ANALYZE {t}")
    try:
        col = attach({"engine": "pgvector", "dsn": pg_url, "table": t, "vector_column": "v",
                      "id_column": "id"})
        try:
            d = col.describe()
            assert (d.index_kind, d.metric, dict(d.build_params)) == ("ivfflat", "cosine",
                                                                      {"lists": 20})
            assert [(k.native, k.low, k.high) for k in col.knobs()] == [("ivfflat.probes", 1,
                                                                         20)]
            q = x[:15] + 0.3
            exact = col.search_exact(q, 5).ids
            recalls = []
            for probes in (1, 20):
                col.set_search_params(probes=probes)
                got = col.search(q, 5).ids
                recalls.append(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(got, exact)]))
            assert recalls[0] < recalls[1] == 1.0
            with pytest.raises(ConfigError, match=r"\[1, 20\]"):
                col.set_search_params(probes=21)
        finally:
            col.close()
        part = attach({"engine": "pgvector", "dsn": pg_url, "table": p, "vector_column": "v",
                       "id_column": "id"})
        try:
            d = part.describe()
            assert (d.segments, d.rows, d.metric, d.index_kind) == (2, 1200, "ip", "hnsw")
        finally:
            part.close()
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {t}")
            conn.execute(f"DROP TABLE IF EXISTS {p}")
