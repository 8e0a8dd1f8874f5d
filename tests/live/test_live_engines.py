"""Live attach, read-only, for LanceDB, Milvus (Lite file and ``milvus-lite server`` by URI),
Redis and Qdrant edge (issue 30 items 1-2; :mod:`retrieval.indexes.live`).

Each engine's collection is created here through the engine's own client, with ids that are not
row numbers (``1_000_000 + 7 * i``) and an ANN index whose recall moves with its knob. The
read-only proof: the collection's rows, a checksum of its vectors, its index definitions, the
engine's object list and (file-based engines) every file's bytes and mtime are the same before
and after every attached command, including an attached process killed with SIGKILL while it
searches.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.errors import ConfigError, NotReachable
from retrieval.indexes.engine import get_engine
from retrieval.indexes.live import LiveCollection, SupportsExactSearch, SupportsSnapshot
from tests.helpers import recall_at

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

N, DIM, NQ, K = 3000, 24, 40, 10
IDS = 1_000_000 + 7 * np.arange(N, dtype=np.int64)
ROOT = Path(__file__).resolve().parents[2]


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(30)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    q = (x[rng.choice(N, NQ, replace=False)] + 0.6 * rng.standard_normal((NQ, DIM))
         ).astype(np.float32)
    return x, q


X, Q = _data()


def _folder_state(path: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``path``: (size, mtime ns, sha256)."""
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns,
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(path.rglob("*")) if p.is_file()}


def _checksum(ids: np.ndarray, vecs: np.ndarray) -> str:
    order = np.argsort(ids)
    h = hashlib.sha256(np.asarray(ids)[order].astype(np.int64).tobytes())
    h.update(np.asarray(vecs, dtype=np.float32)[order].tobytes())
    return h.hexdigest()


@dataclass
class Live:
    """One engine's collection made by the test: the ``live:`` section, a function reading
    the read-only state through the engine's own client, the knob, and refusals."""

    engine: str
    section: dict[str, Any]
    state: Callable[[], dict[str, Any]]
    metric: str
    knob: tuple[str, int, int]
    bad: list[tuple[dict[str, Any], type[Exception]]] = field(default_factory=list)
    #: the target of the end-to-end sweep (what the knob's range reaches on this index)
    target: float = 0.9


# --- the engines' collections, made through their own clients ---------------------------------
@pytest.fixture(scope="module")
def lancedb_live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    import lancedb
    import pyarrow as pa
    from lancedb.index import IvfPq

    folder = tmp_path_factory.mktemp("lance") / "db"
    db = lancedb.connect(str(folder))
    vec = pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), DIM)
    table = db.create_table("items", pa.table({"item_id": pa.array(IDS), "emb": vec}))
    table.create_index("emb", config=IvfPq(distance_type="l2", num_partitions=8,
                                           num_sub_vectors=6))

    def state() -> dict[str, Any]:
        files = _folder_state(folder)
        t = lancedb.connect(str(folder)).open_table("items")
        arrow = t.to_arrow()
        return {"files": files, "rows": t.count_rows(), "version": t.version,
                "indices": [(i.name, i.index_type, i.num_indexed_rows) for i in t.list_indices()],
                "tables": list(lancedb.connect(str(folder)).list_tables().tables),
                "checksum": _checksum(arrow.column("item_id").to_numpy(), np.asarray(
                    arrow.column("emb").combine_chunks().flatten()).reshape(-1, DIM))}

    section = {"engine": "lancedb", "uri": str(folder), "table": "items",
               "vector_column": "emb", "id_column": "item_id"}
    return Live("lancedb", section, state, "l2", ("nprobes", 1, 8), target=0.5, bad=[
        ({"table": "nope"}, ConfigError), ({"vector_column": "nope"}, ConfigError),
        ({"id_column": "emb"}, ConfigError), ({"dim": DIM + 1}, ConfigError),
        ({"metric": "ip"}, ConfigError), ({"uri": str(folder.parent / "gone")}, NotReachable)])


def _milvus_make(uri: str) -> None:
    from pymilvus import DataType, MilvusClient

    c = MilvusClient(uri=uri, dedicated=True)
    schema = c.create_schema(auto_id=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    c.create_collection("items", schema=schema)
    c.insert("items", [{"pk": int(i), "vec": v} for i, v in zip(IDS, X)])
    c.flush("items")
    params = c.prepare_index_params()
    params.add_index("vec", index_type="HNSW", metric_type="COSINE",
                     params={"params": {"M": 4, "efConstruction": 16}})
    c.create_index("items", params, sync=False)
    for _ in range(300):
        info = c.describe_index("items", "vec")
        if info.get("indexed_rows") == N:
            break
        time.sleep(0.1)
    c.release_collection("items")
    c.load_collection("items")
    c.close()


def _milvus_state(uri: str, data: Path) -> dict[str, Any]:
    from pymilvus import MilvusClient

    c = MilvusClient(uri=uri, dedicated=True)  # a channel of its own (no stale shared one)
    try:
        it = c.query_iterator("items", batch_size=1000, output_fields=["pk", "vec"])
        ids, vecs = [], []
        while rows := it.next():
            ids += [r["pk"] for r in rows]
            vecs += [r["vec"] for r in rows]
        it.close()
        return {"files": _folder_state(data), "collections": c.list_collections(),
                "schema": str(c.describe_collection("items")),
                "index": c.describe_index("items", "vec"),
                "rows": c.query("items", output_fields=["count(*)"])[0]["count(*)"],
                "load": str(c.get_load_state("items")),
                "checksum": _checksum(np.array(ids), np.array(vecs, dtype=np.float32))}
    finally:
        c.close()


@pytest.fixture(scope="module")
def milvus_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A ``milvus-lite server`` over a data folder, attached by URI (the test process may use
    its own client beside it; a Milvus Lite file is locked by one process)."""
    pytest.importorskip("milvus_lite")
    from retrieval.engines.milvus.server import free_port, milvus_lite_server

    data = tmp_path_factory.mktemp("milvus") / "data"
    with milvus_lite_server(data) as uri:
        _milvus_make(uri)
        section = {"engine": "milvus", "uri": uri, "collection": "items",
                   "vector_field": "vec", "id_field": "pk"}
        yield Live("milvus", section, lambda: _milvus_state(uri, data), "cosine",
                   ("ef", 1, 200), bad=[
                       ({"collection": "nope"}, ConfigError),
                       ({"vector_field": "nope"}, ConfigError),
                       ({"id_field": "vec"}, ConfigError), ({"dim": DIM + 1}, ConfigError),
                       ({"metric": "l2"}, ConfigError),
                       ({"uri": f"http://127.0.0.1:{free_port()}"}, NotReachable),
                       ({"uri": str(data.parent / "gone.db")}, NotReachable)])


@pytest.fixture(scope="module")
def redis_live(redis_url: str) -> Iterator[Live]:
    import redis

    r = redis.Redis.from_url(redis_url)
    tag = uuid.uuid4().hex[:8]
    index, prefix = f"rwbtest-live-{tag}", f"rwbtest-live-{tag}:"
    pipe = r.pipeline(transaction=False)
    for i, v in zip(IDS, X):
        pipe.hset(f"{prefix}{i}", mapping={"emb": v.tobytes(), "kind": "a"})
    pipe.execute()
    r.execute_command("FT.CREATE", index, "ON", "HASH", "PREFIX", 1, prefix, "SCHEMA", "emb",
                      "VECTOR", "HNSW", 10, "TYPE", "FLOAT32", "DIM", DIM, "DISTANCE_METRIC",
                      "IP", "M", 4, "EF_CONSTRUCTION", 10)
    for _ in range(300):
        if float(r.ft(index).info().get("percent_indexed", 0)) >= 1.0:
            break
        time.sleep(0.1)

    def state() -> dict[str, Any]:
        info = r.ft(index).info()
        keys = sorted(r.scan_iter(match=f"{prefix}*", count=1000))
        h = hashlib.sha256()
        for key in keys:
            h.update(key)
            h.update(json.dumps(sorted((k.decode(), v.hex()) for k, v in
                                       r.hgetall(key).items())).encode())
        return {"list": sorted(r.execute_command("FT._LIST")), "dbsize": r.dbsize(),
                "definition": str(info["index_definition"]), "attributes":
                str(info["attributes"]), "docs": info["num_docs"], "keys": len(keys),
                "checksum": h.hexdigest()}

    section = {"engine": "redis", "url": redis_url, "index": index}
    from retrieval.engines.redis.server import free_port

    yield Live("redis", section, state, "ip", ("EF_RUNTIME", 1, 200), bad=[
        ({"index": "nope"}, ConfigError), ({"vector_field": "nope"}, ConfigError),
        ({"dim": DIM + 1}, ConfigError), ({"metric": "l2"}, ConfigError),
        ({"url": f"redis://:s3cret-pw@127.0.0.1:{free_port()}"}, NotReachable)])
    r.execute_command("FT.DROPINDEX", index)  # the test's own index and keys
    for key in r.scan_iter(match=f"{prefix}*", count=1000):
        r.delete(key)
    r.close()


@pytest.fixture(scope="module")
def qdrant_live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    import qdrant_edge as q

    folder = tmp_path_factory.mktemp("qdrant") / "shard"
    cfg = q.EdgeConfig(
        vectors=q.EdgeVectorParams(size=DIM, distance=q.Distance.Euclid),
        hnsw_config=q.HnswIndexConfig(m=4, ef_construct=16, full_scan_threshold=1),
        optimizers=q.EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=1))
    shard = q.EdgeShard.create(str(folder), cfg)
    shard.update(q.UpdateOperation.upsert_points([q.Point(int(i), v) for i, v in zip(IDS, X)]))
    shard.optimize()
    shard.close()

    def state() -> dict[str, Any]:
        files = _folder_state(folder)
        with tempfile.TemporaryDirectory() as tmp:  # opening a shard writes: read a copy
            copy = Path(tmp) / "s"
            shutil.copytree(folder, copy)
            s = q.EdgeShard.load(str(copy))
            info = s.info()
            recs, _ = s.scroll(q.ScrollRequest(limit=N + 10, with_vector=True))
            s.close()
        ids = np.array([r.id for r in recs])
        vecs = np.array([r.vector if not isinstance(r.vector, dict) else r.vector[""]
                         for r in recs], dtype=np.float32)
        return {"files": files, "points": info.points_count, "segments": info.segments_count,
                "indexed": info.indexed_vectors_count, "checksum": _checksum(ids, vecs)}

    section = {"engine": "qdrant", "path": str(folder)}
    return Live("qdrant", section, state, "l2", ("hnsw_ef", 1, 200), bad=[
        ({"path": str(folder.parent)}, ConfigError), ({"vector_name": "nope"}, ConfigError),
        ({"dim": DIM + 1}, ConfigError), ({"metric": "cosine"}, ConfigError),
        ({"path": str(folder.parent / "gone")}, NotReachable)])


ENGINES = [pytest.param("lancedb", id="lancedb"),
           pytest.param("milvus", id="milvus", marks=pytest.mark.milvus),
           pytest.param("redis", id="redis", marks=pytest.mark.redis),
           pytest.param("qdrant", id="qdrant")]


@pytest.fixture(params=ENGINES)
def live(request: pytest.FixtureRequest) -> Live:
    return request.getfixturevalue(f"{request.param}_live")  # type: ignore[no-any-return]


def _attach(live: Live, **over: Any) -> Any:
    hook = get_engine(live.engine).attach
    assert hook is not None
    return hook({**live.section, **over}, "spec.yaml")


def _numpy_exact(ids: np.ndarray, vecs: np.ndarray, q: np.ndarray, metric: str, k: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Top-k ids and rwb distances by numpy (float64), ties by ascending id."""
    x, qq = vecs.astype(np.float64), q.astype(np.float64)
    if metric == "cosine":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        qq = qq / np.linalg.norm(qq, axis=1, keepdims=True)
    if metric == "l2":
        d = ((qq[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    else:
        d = -(qq @ x.T) if metric == "ip" else 1.0 - qq @ x.T
    order = np.lexsort((np.broadcast_to(ids, d.shape), d), axis=-1)[:, :k]
    return ids[order], np.take_along_axis(d, order, 1)



# --- attach, describe, refusals --------------------------------------------------------------
def test_attach_describes_the_collection(live: Live) -> None:
    coll = _attach(live)
    try:
        assert isinstance(coll, LiveCollection)
        assert isinstance(coll, SupportsExactSearch) and isinstance(coll, SupportsSnapshot)
        desc = coll.describe()
        assert (desc.engine, desc.dim, desc.metric, desc.rows) == (live.engine, DIM,
                                                                    live.metric, N)
        assert desc.index_kind and desc.untested is None
        json.dumps(dict(desc.details)), json.dumps(dict(desc.build_params))
        name, low, high = live.knob
        knob = {kb.name: kb for kb in coll.knobs()}[name]
        assert knob.low <= low < high <= knob.high
        with pytest.raises(ConfigError, match="search param"):
            coll.set_search_params(no_such_knob=3)
        with pytest.raises(ConfigError):
            coll.set_search_params(**{name: knob.high + 1})
        with pytest.raises(ConfigError, match="dimension"):
            coll.search(Q[:, :-1], K)
    finally:
        coll.close()


def test_refusals_in_one_line(live: Live) -> None:
    for over, err in live.bad:
        with pytest.raises(err) as info:
            _attach(live, **over)
        text = str(info.value)
        assert "\n" not in text and text.startswith("spec.yaml"), text
        assert "s3cret-pw" not in text
    with pytest.raises(ConfigError, match="unknown parameter 'colour'"):
        _attach(live, colour="blue")


# --- exact both ways, snapshot, knob ---------------------------------------------------------
def test_exact_path_equals_numpy_over_the_snapshot(live: Live) -> None:
    coll = _attach(live)
    try:
        parts = list(coll.iter_vectors(batch=700))
        ids = np.concatenate([p[0] for p in parts])
        vecs = np.concatenate([p[1] for p in parts])
        assert len(parts) > 1 and sorted(ids.tolist()) == IDS.tolist()
        by_id = dict(zip(IDS.tolist(), range(N)))
        np.testing.assert_allclose(vecs, X[[by_id[i] for i in ids.tolist()]], rtol=0, atol=1e-6)
        tail = np.concatenate([p[0] for p in coll.iter_vectors(batch=500, start=2100)])
        assert tail.tolist() == ids[2100:].tolist()  # a resumed snapshot: the same order
        want_ids, want_d = _numpy_exact(ids, vecs, Q, live.metric, K)
        got = coll.search_exact(Q, K)
        assert recall_at(got.ids, want_ids) == 1.0
        np.testing.assert_allclose(got.distances, want_d, rtol=1e-4, atol=1e-4)
    finally:
        coll.close()


def test_recall_moves_with_the_knob(live: Live) -> None:
    coll = _attach(live)
    try:
        truth = coll.search_exact(Q, K).ids
        name, low, high = live.knob
        coll.set_search_params(**{name: low})
        r_low = recall_at(coll.search(Q, K).ids, truth)
        coll.set_search_params(**{name: high})
        r_high = recall_at(coll.search(Q, K).ids, truth)
        assert r_low + 0.05 < r_high, (r_low, r_high)
        one = coll.search(Q[:1], K)
        assert one.ids.shape == (1, K) and set(one.ids[0]) <= set(IDS.tolist())
    finally:
        coll.close()


# --- read-only proof -------------------------------------------------------------------------
_CHILD = """
import json, sys, numpy as np
from retrieval.indexes.engine import get_engine
section = json.loads(sys.argv[1])
coll = get_engine(section["engine"]).attach(section, "child.yaml")
q = np.load(sys.argv[2])
coll.describe()
name, value = sys.argv[3], int(sys.argv[4])
coll.set_search_params(**{name: value})
coll.search(q, 10); coll.search_exact(q[:2], 10)
print("ready", flush=True)
while True:
    coll.search(q, 10)
    for _ in coll.iter_vectors(batch=500):
        pass
"""


def test_nothing_changes_even_when_killed(live: Live, tmp_path: Path) -> None:
    before = live.state()
    coll = _attach(live)
    coll.describe()
    name, _, high = live.knob
    coll.set_search_params(**{name: high})
    coll.search(Q, K)
    coll.search_exact(Q, K)
    list(coll.iter_vectors(batch=1000))
    coll.close()
    assert live.state() == before

    np.save(tmp_path / "q.npy", Q)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(live.section), str(tmp_path / "q.npy"), name,
         str(high)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line
        time.sleep(0.5)  # mid-way through a search or a snapshot
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert live.state() == before


# --- engine-specific ---------------------------------------------------------------------------
@pytest.mark.milvus
def test_milvus_lite_file_attached_read_only(tmp_path: Path) -> None:
    """A Milvus Lite database file (locked per process): made and attached in two child
    processes; its files are byte-identical after, and the exact path equals numpy."""
    pytest.importorskip("milvus_lite")
    db = tmp_path / "app.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    make = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import test_live_engines as t; t._milvus_make({str(db)!r})")
    subprocess.run([sys.executable, "-c", make], check=True, env=env, timeout=300)
    before = _folder_state(db)
    np.save(tmp_path / "q.npy", Q)
    use = f"""
import json, numpy as np
from retrieval.engines.milvus.live import attach
c = attach({{"engine": "milvus", "uri": {str(db)!r}, "collection": "items",
            "vector_field": "vec", "id_field": "pk"}}, "spec.yaml")
q = np.load({str(tmp_path / "q.npy")!r})
d = c.describe(); c.set_search_params(ef=200)
print(json.dumps({{"rows": d.rows, "kind": d.index_kind, "segments": d.segments,
                  "segments_source": d.details["segments_source"],
                  "exact": c.search_exact(q, 10).ids.tolist(),
                  "ann": c.search(q, 10).ids.tolist()}}))
c.close()
"""
    out = subprocess.run([sys.executable, "-c", use], check=True, env=env, timeout=300,
                         capture_output=True, text=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert (got["rows"], got["kind"]) == (N, "HNSW")
    parquet = list(db.glob("collections/items/partitions/*/data/*.parquet"))
    assert got["segments"] == len(parquet) >= 1  # Lite: its sealed data segment files
    assert "parquet" in got["segments_source"]
    want, _ = _numpy_exact(IDS, X, Q, "cosine", K)
    assert recall_at(np.array(got["exact"]), want) == 1.0
    assert recall_at(np.array(got["ann"]), want) > 0.9
    assert _folder_state(db) == before


@pytest.mark.redis
def test_redis_refuses_a_key_that_is_not_an_integer(redis_live: Live) -> None:
    import redis

    r = redis.Redis.from_url(redis_live.section["url"])
    prefix = str(redis_live.state()["definition"]).split("'prefixes': ['")[1].split("'")[0]
    key = f"{prefix}not-a-number"
    r.hset(key, mapping={"emb": X[0].tobytes()})  # the test's own data
    try:
        with pytest.raises(ConfigError, match=r"not-a-number.*integer"):
            _attach(redis_live)
    finally:
        r.delete(key)
        r.close()


def test_qdrant_server_path_is_said_untested(qdrant_live: Live) -> None:
    """No Qdrant server runs here: a ``url`` section is refused in one line when qdrant-client
    is absent, or is unreachable; with a server the description's ``untested`` says so."""
    from retrieval.engines.qdrant.live import UNTESTED

    assert "not tested" in UNTESTED
    with pytest.raises((ConfigError, NotReachable)) as info:
        _attach(qdrant_live, path=None, url="http://127.0.0.1:9", collection="items")
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="exactly one of 'path'"):
        _attach(qdrant_live, url="http://127.0.0.1:9")


# --- end to end: sweep in place -> export -> verify against the live collection ----------------
def _rwb(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "retrieval", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_sweep_in_place_export_verify(live: Live, tmp_path: Path) -> None:
    import yaml

    before = live.state()
    section, env = dict(live.section), {}
    if live.engine == "redis":  # the URL from the environment, as a user keeps a secret out
        section["url"], env["RWB_LIVE_URL"] = "${RWB_LIVE_URL}", live.section["url"]
    np.save(tmp_path / "q.npy", Q)
    spec = {"name": f"live-{live.engine}", "live": section, "queries": {"log": "q.npy"},
            "k": K, "target_recall": live.target, "heldout_fraction": 0.0,
            "budget": {"max_qps": 5000}, "knob": live.knob[0],
            "ground_truth": {"method": "snapshot" if live.engine in ("milvus", "redis")
                             else "exact", "batch": 1000},
            # rwb watch of the same spec: every logged query checked, windows of 10
            "watch": {"window": 10, "sample": 1.0, "target_recall": 0.05}}
    (tmp_path / "live.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    swept = _rwb("sweep", "live.yaml", "--out", "run", "--json", cwd=tmp_path, env=env)
    assert swept.returncode == 0, swept.stderr[-2000:]
    s = json.loads(swept.stdout)
    name = live.knob[0]
    chosen = s["chosen"]
    value = chosen["search"][name]
    assert s["engine"] == live.engine and chosen["native"] == {name: value}
    assert chosen["recall_lb"] >= live.target
    below = [p for p in s["probes"] if p["kind"] == "probe" and p["search"][name] == value - 1]
    assert value == s["knob"]["low"] or (below and below[0]["meets"] is False)
    # the chosen recall, recomputed here against numpy over the collection's own vectors
    coll = _attach(live)
    try:
        coll.set_search_params(**{name: value})
        got = coll.search(Q, K).ids
    finally:
        coll.close()
    want, _ = _numpy_exact(IDS, X, Q, live.metric, K)
    assert recall_at(got, want) == pytest.approx(chosen["recall"], abs=1e-9)

    other = tmp_path / "elsewhere"
    other.mkdir()
    out = other / f"{live.engine}.yaml"
    exp = _rwb("export", str(tmp_path / "run"), "--engine", live.engine, "--out", str(out),
               cwd=tmp_path, env=env)
    assert exp.returncode == 0, exp.stderr[-2000:]
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "live-index-config" and doc["settings"] == {name: value}
    assert doc["live"] == section
    ver = _rwb("verify", out.name, cwd=other, env=env)
    assert ver.returncode == 0 and "HOLDS" in ver.stdout, ver.stdout + ver.stderr[-2000:]
    assert live.state() == before

    # watched with the exported config: each window's recall against the engine's exact answer
    watched = _rwb("watch", "live.yaml", "--config", str(out), "--once", "--json",
                   "--out", "watch", cwd=tmp_path, env=env)
    assert watched.returncode == 0, watched.stdout[-1000:] + watched.stderr[-2000:]
    w = json.loads(watched.stdout)
    assert w["search_params"] == {name: value} and not w["alarm"]
    assert [win["checked"] for win in w["windows"]] == [10] * (NQ // 10)
    for win in w["windows"]:
        assert 0.0 <= win["recall_lower"] <= win["recall"] <= 1.0
        assert win["p50_ms"] <= win["p95_ms"] <= win["p99_ms"] and win["alarm"] is False
    # the windows together: the exported config's recall over the log, as measured above
    mean = sum(win["recall"] for win in w["windows"]) / len(w["windows"])
    assert mean == pytest.approx(chosen["recall"], abs=1e-9)
    assert w["lab"]["config"] is not None
    assert live.state() == before


# --- other index kinds, load state -----------------------------------------------------------
def test_lancedb_hnsw_and_qdrant_quantized_knobs(tmp_path: Path) -> None:
    """LanceDB IVF_HNSW_SQ sweeps ``ef``; a binary-quantized Qdrant shard ``oversampling``:
    each moves recall against the engine's own exact path."""
    import lancedb
    import pyarrow as pa
    import qdrant_edge as q
    from lancedb.index import IvfHnswSq

    table = lancedb.connect(str(tmp_path / "db")).create_table("items", pa.table({
        "id": pa.array(IDS), "vector": pa.FixedSizeListArray.from_arrays(pa.array(
            X.reshape(-1)), DIM)}))
    table.create_index("vector", config=IvfHnswSq(distance_type="cosine", num_partitions=1,
                                                  m=4, ef_construction=16))
    shard = q.EdgeShard.create(str(tmp_path / "shard"), q.EdgeConfig(
        vectors=q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine),
        hnsw_config=q.HnswIndexConfig(m=8, ef_construct=64, full_scan_threshold=1),
        quantization_config=q.BinaryQuantizationConfig(always_ram=True),
        optimizers=q.EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=1)))
    shard.update(q.UpdateOperation.upsert_points([q.Point(int(i), v) for i, v in zip(IDS, X)]))
    shard.optimize()
    shard.close()
    cases = [({"engine": "lancedb", "uri": str(tmp_path / "db"), "table": "items",
               "vector_column": "vector"}, "IVF_HNSW_SQ", {}, "ef", 10, 400),
             ({"engine": "qdrant", "path": str(tmp_path / "shard"), "collection": "mine"},
              "hnsw", {"hnsw_ef": 400}, "oversampling", 1, 16)]
    for section, kind, fixed, knob, low, high in cases:
        coll = get_engine(section["engine"]).attach(section, "spec.yaml")
        try:
            desc = coll.describe()
            assert (desc.index_kind, desc.metric, desc.rows) == (kind, "cosine", N)
            assert knob in {kb.name for kb in coll.knobs()}
            truth = coll.search_exact(Q, K).ids
            want, _ = _numpy_exact(IDS, X, Q, "cosine", K)
            assert recall_at(truth, want) == 1.0
            coll.set_search_params(**fixed, **{knob: low})
            r_low = recall_at(coll.search(Q, K).ids, truth)
            coll.set_search_params(**{knob: high})
            r_high = recall_at(coll.search(Q, K).ids, truth)
            assert r_low + 0.05 < r_high, (section["engine"], r_low, r_high)
        finally:
            coll.close()


@pytest.mark.milvus
def test_milvus_lite_by_uri_says_why_it_has_no_segment_count(milvus_live: Live) -> None:
    """Milvus Lite implements no segment RPC: served by URI, the count is None and the
    description says why (a server's list_persistent_segments answered UNIMPLEMENTED)."""
    coll = _attach(milvus_live)
    try:
        d = coll.describe()
    finally:
        coll.close()
    assert d.segments is None
    assert d.details["segments_source"].startswith("unavailable:")
    assert "UNIMPLEMENTED" in d.details["segments_source"]


@pytest.mark.milvus
def test_milvus_collection_loaded_by_rwb_is_released_again(milvus_live: Live) -> None:
    """A released collection (the user's state) is loaded to search and released at close."""
    from pymilvus import MilvusClient

    uri = milvus_live.section["uri"]
    c = MilvusClient(uri=uri, dedicated=True)
    try:
        c.release_collection("items")  # the user's choice, made here by the test
        first, second = _attach(milvus_live), _attach(milvus_live)  # two workers' handles
        assert first.describe().details["loaded_by_rwb"] is True
        first.close()  # the other handle still relies on the load
        assert second.search(Q[:3], K).ids.shape == (3, K)
        second.close()
        assert "NotLoad" in str(c.get_load_state("items")["state"])
    finally:
        c.load_collection("items")  # as the fixture made it
        c.close()
