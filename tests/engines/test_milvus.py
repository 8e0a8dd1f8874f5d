"""The milvus backend against real Milvus Lite 3.2 (embedded, one data directory per index)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason="pymilvus not installed (extra 'milvus')")
pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")

from retrieval.data import VectorDataset
from retrieval.engines.milvus.index import MilvusIndex, redact_uri
from retrieval.engines.milvus.params import BUILD_KINDS, IvfFlatBuild
from retrieval.errors import BackendError, ConfigError, DataError
from retrieval.groundtruth.exact import exact_knn
from retrieval.indexes import BuildInfo, create_index, get_backend
from retrieval.loaders.synthetic import make_synthetic
from retrieval.stats.metrics import recall_by_id

pytestmark = [pytest.mark.slow, pytest.mark.milvus]

K = 10
BUILDS: dict[str, dict[str, object]] = {
    "HNSW": {"index_type": "HNSW", "M": 16, "efConstruction": 200},
    "HNSW_SQ": {"index_type": "HNSW_SQ", "M": 16, "efConstruction": 200},
    "IVF_FLAT": {"index_type": "IVF_FLAT", "nlist": 64},
    "IVF_SQ8": {"index_type": "IVF_SQ8", "nlist": 64},
    "FLAT": {"index_type": "FLAT"},
    "AUTOINDEX": {"index_type": "AUTOINDEX"},
}
#: recall@10 required at most_accurate_search (quantised kinds lose a little; AUTOINDEX runs at
#: Milvus Lite's fixed ef 64)
MIN_RECALL = {"HNSW": 0.99, "IVF_FLAT": 0.99, "FLAT": 0.99, "HNSW_SQ": 0.95, "IVF_SQ8": 0.95,
              "AUTOINDEX": 0.95}

Built = tuple[MilvusIndex, BuildInfo]


@pytest.fixture(scope="module")
def ds() -> VectorDataset:
    return make_synthetic(3000, 32, 100, seed=0)


@pytest.fixture(scope="module")
def exact(ds: VectorDataset) -> np.ndarray:
    return exact_knn(ds.base, ds.queries, "l2", K, threads=1).ids


@pytest.fixture(scope="module")
def built(ds: VectorDataset, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Callable[[str], Built]]:
    """Build each index type at most once per module (lazily)."""
    cache: dict[str, Built] = {}

    def get(kind: str) -> Built:
        if kind not in cache:
            idx = create_index("milvus", ds.dim, "l2", BUILDS[kind],
                               workdir=tmp_path_factory.mktemp(kind.lower()))
            assert isinstance(idx, MilvusIndex)
            cache[kind] = (idx, idx.build(ds.base))
        return cache[kind]

    yield get
    for idx, _ in cache.values():
        idx.close()


def recall(idx: MilvusIndex, ds: VectorDataset, exact: np.ndarray, **params: int) -> float:
    idx.set_search_params(**params)
    return float(recall_by_id(idx.search(ds.queries, K).ids, exact, K).mean())


def test_registered_with_versions() -> None:
    cls = get_backend("milvus")
    assert cls is MilvusIndex
    version = cls.library_version()
    assert "pymilvus 3." in version and "milvus-lite 3." in version


@pytest.mark.parametrize("kind", list(BUILD_KINDS))
def test_each_index_type_builds_verified_and_recalls(
    kind: str, built: Callable[[str], Built], ds: VectorDataset, exact: np.ndarray
) -> None:
    idx, info = built(kind)
    # the params Milvus reports (read back independently) are the ones sent, nested correctly
    described = idx.connect().describe_index(idx.collection, "vec")
    assert described["index_type"] == kind
    expected = {k: v for k, v in BUILDS[kind].items() if k != "index_type"}
    if kind == "HNSW_SQ":
        expected["sq_type"] = "SQ8"
    assert (described.get("params") or {}) == expected
    assert int(described["indexed_rows"]) == ds.n_base
    assert info.n == ds.n_base and info.build_s > 0
    # one index file per data segment, and memory measured from those files
    assert info.extra["segments"] >= 1
    assert info.memory_bytes is not None and info.memory_bytes == idx.memory_bytes() > 0
    rec = recall(idx, ds, exact, **MilvusIndex.most_accurate_search(idx.build_params))
    assert rec >= MIN_RECALL[kind], f"{kind}: recall@{K} {rec:.4f}"


@pytest.mark.parametrize(("kind", "knob", "low", "high"), [
    ("HNSW", "ef", K, 4096), ("HNSW_SQ", "ef", K, 4096),
    ("IVF_FLAT", "nprobe", 1, 64), ("IVF_SQ8", "nprobe", 1, 64),
])
def test_recall_moves_with_the_knob(
    kind: str, knob: str, low: int, high: int, built: Callable[[str], Built],
    ds: VectorDataset, exact: np.ndarray,
) -> None:
    idx, _ = built(kind)
    r_low = recall(idx, ds, exact, **{knob: low})
    r_high = recall(idx, ds, exact, **{knob: high})
    assert r_low < r_high, f"{kind}: {knob}={low} -> {r_low}, {knob}={high} -> {r_high}"
    check = idx.verify_not_brute_force(ds.queries[:50], K, exact[:50])
    assert check.ok and check.knob == knob and check.low == low and check.high == high
    assert check.recall_low < check.recall_high
    assert idx.search_params.model_dump() == {knob: high}  # restored after the check


@pytest.mark.parametrize("kind", ["FLAT", "AUTOINDEX"])
def test_no_knob_kinds(kind: str, built: Callable[[str], Built], ds: VectorDataset,
                       exact: np.ndarray) -> None:
    idx, _ = built(kind)
    check = idx.verify_not_brute_force(ds.queries[:5], K, exact[:5])
    assert check.ok and "no search knob" in check.reason
    with pytest.raises(ConfigError, match=r"takes no search params \(allowed: none\); "
                       r"received \['ef'\]"):
        idx.set_search_params(ef=64)
    idx.set_search_params(ef=None, nprobe=None)  # MilvusSearch's unset knobs are fine


def test_brute_force_fallback_is_detected(
    built: Callable[[str], Built], ds: VectorDataset, exact: np.ndarray
) -> None:
    """Reproduce the trap for real: rows inserted but never flushed are brute-forced by Milvus
    Lite whatever ef says; verify_not_brute_force must notice."""
    idx, _ = built("HNSW")
    probe = MilvusIndex(ds.dim, "l2", idx.build_params, workdir=None)
    try:
        probe.build(ds.base[:100])  # a real collection, then rebuilt below without a flush
        client = probe.connect()
        client.drop_collection(probe.collection)
        from pymilvus import DataType

        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=ds.dim)
        client.create_collection(probe.collection, schema=schema)
        params = client.prepare_index_params()
        params.add_index(field_name="vec", index_type="HNSW", metric_type="L2",
                         params={"params": {"M": 16, "efConstruction": 200}})
        client.create_index(probe.collection, params, sync=False)
        client.load_collection(probe.collection)
        client.insert(probe.collection, [{"id": i, "vec": v} for i, v in enumerate(ds.base)])
        with pytest.raises(BackendError, match="brute-force"):
            probe.verify_not_brute_force(ds.queries[:30], K, exact[:30])
        check = probe.verify_not_brute_force(ds.queries[:30], K, exact[:30],
                                             raise_on_failure=False)
        assert not check.ok and check.identical and check.recall_low == 1.0
    finally:
        probe.close()


def test_faiss_threads_pinned_in_milvus_lite_threads(tmp_path: Path) -> None:
    """An OpenMP thread count is per thread: the one set by the caller must reach the threads
    where Milvus Lite runs faiss (its gRPC workers and the collection's background worker)."""
    import faiss

    ds = make_synthetic(300, 8, 2, seed=5)
    caller = faiss.omp_get_max_threads()
    for threads in (1, 3):
        with MilvusIndex(ds.dim, "l2", BUILD_KINDS["FLAT"](), threads=threads,
                         workdir=tmp_path) as idx:
            info = idx.build(ds.base)
            assert info.extra["threads"] == threads
            lite = idx._lite
            assert lite is not None
            workers = {lite.pool.submit(faiss.omp_get_max_threads).result() for _ in range(20)}
            background = lite.collection(idx.collection)._bg_executor.submit(
                faiss.omp_get_max_threads).result()
            assert workers == {threads} and background == threads
    assert faiss.omp_get_max_threads() == caller  # the caller's own setting is left alone


def test_flat_params_trap_is_caught(tmp_path: Path, ds: VectorDataset) -> None:
    """Re-create the index the naive way (params not nested): Milvus Lite drops them silently;
    verify_index_params must refuse it."""
    idx = MilvusIndex(ds.dim, "l2", BUILD_KINDS["HNSW"](M=8, efConstruction=40),
                      workdir=tmp_path)
    try:
        idx.build(ds.base[:300])
        assert idx.verify_index_params()["params"] == {"M": 8, "efConstruction": 40}
        client = idx.connect()
        client.release_collection(idx.collection)
        client.drop_index(idx.collection, "vec")
        params = client.prepare_index_params()
        params.add_index(field_name="vec", index_type="HNSW", index_name="vec",
                         metric_type="L2", params={"M": 8, "efConstruction": 40})  # flat
        client.create_index(idx.collection, params, sync=False)
        with pytest.raises(BackendError, match="did not take effect"):
            idx.verify_index_params()
    finally:
        idx.close()


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_distances_ids_and_metrics(metric: str, tmp_path: Path) -> None:
    ds = make_synthetic(500, 16, 20, metric=metric, seed=1)  # type: ignore[arg-type]
    gt = exact_knn(ds.base, ds.queries, ds.metric, K, threads=1)
    ids = 10**12 + 3 * np.arange(ds.n_base, dtype=np.int64)[::-1]
    idx = create_index("milvus", ds.dim, ds.metric, {"index_type": "FLAT"}, workdir=tmp_path)
    try:
        idx.build(ds.base, ids)
        res = idx.search(ds.queries, K)
    finally:
        idx.close()
    assert res.ids.dtype == np.int64 and res.distances.dtype == np.float32
    assert np.array_equal(res.ids, ids[gt.ids])  # custom ids honoured, exact order
    np.testing.assert_allclose(res.distances, gt.distances, rtol=1e-4, atol=1e-4)
    assert (np.diff(res.distances, axis=1) >= 0).all()


def test_fewer_than_k_results_are_padded(tmp_path: Path) -> None:
    ds = make_synthetic(5, 8, 3, seed=2)
    with MilvusIndex(ds.dim, "l2", IvfFlatBuild(nlist=2), workdir=tmp_path) as idx:
        idx.build(ds.base)
        idx.set_search_params(nprobe=2)
        res = idx.search(ds.queries, 8)
    assert (res.ids[:, :5] >= 0).all() and (res.ids[:, 5:] == -1).all()
    assert np.isinf(res.distances[:, 5:]).all() and np.isfinite(res.distances[:, :5]).all()


def test_bad_params_rejected_before_milvus(tmp_path: Path, ds: VectorDataset) -> None:
    """Nothing is created on disk (no Milvus Lite started) for a rejected config."""
    with pytest.raises(ConfigError, match=r"field 'M' must be >= 2; received -3"):
        create_index("milvus", 32, "l2", {"M": -3}, workdir=tmp_path)
    with pytest.raises(ConfigError, match=r"allowed: HNSW.*Did you mean 'IVF_SQ8'"):
        create_index("milvus", 32, "l2", {"index_type": "IVF_PQ"}, workdir=tmp_path)
    ivf = create_index("milvus", 32, "l2", {"index_type": "IVF_FLAT", "nlist": 16},
                       workdir=tmp_path)
    with pytest.raises(ConfigError, match=r"'nprobe' must be <= nlist \(16\); received 17"):
        ivf.set_search_params(nprobe=17)
    assert ivf.search_params.model_dump() == {"nprobe": 8}  # unchanged
    with pytest.raises(ConfigError, match="'ef'"):
        ivf.set_search_params(ef=32)
    with pytest.raises(ConfigError, match=r"'nlist' must be <= the number of vectors \(10\)"):
        ivf.build(ds.base[:10])
    hnsw = create_index("milvus", 32, "l2", {}, workdir=tmp_path)
    hnsw.set_search_params(ef=5)  # legal alone; illegal with k=10
    with pytest.raises(ConfigError, match=r"'ef' must be >= k \(10\); received 5"):
        MilvusIndex.check_combination(hnsw.build_params, hnsw.search_params, 10)
    with pytest.raises(ConfigError, match="'k'"):
        MilvusIndex.check_combination(hnsw.build_params, hnsw.search_params, 0)
    with pytest.raises(ConfigError, match=r"knob 'nprobe' does not apply"):
        MilvusIndex.knob_range("nprobe", hnsw.build_params, 10)
    with pytest.raises(DataError, match="unique"):
        hnsw.build(ds.base, np.zeros(ds.n_base, dtype=np.int64))
    with pytest.raises(DataError, match="-1"):
        hnsw.build(ds.base, np.arange(ds.n_base) - 1)
    ivf.close()
    hnsw.close()
    assert list(tmp_path.iterdir()) == []


def test_unreachable_uri_fails_fast_without_secrets(capfd: pytest.CaptureFixture[str]) -> None:
    idx = MilvusIndex(8, "l2", uri="http://127.0.0.1:1", token="s3cret-token",
                      connect_timeout_s=3.0)
    t0 = time.perf_counter()
    with pytest.raises(BackendError) as err:
        idx.build(np.ones((4, 8), dtype=np.float32))
    assert time.perf_counter() - t0 < 10.0
    msg = str(err.value)
    assert "http://127.0.0.1:1" in msg and "timeout 3 s" in msg
    assert "s3cret" not in msg and "s3cret" not in repr(idx)
    assert "Traceback" not in capfd.readouterr().err
    idx.close()
    idx.close()


def test_uri_and_token_from_environment_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RWB_MILVUS_URI", "http://alice:pw123@127.0.0.1:1")
    monkeypatch.setenv("RWB_MILVUS_TOKEN", "tok456")
    idx = create_index("milvus", 8, "l2", {})
    assert isinstance(idx, MilvusIndex) and not idx.embedded
    with pytest.raises(BackendError) as err:
        idx.build(np.ones((4, 8), dtype=np.float32))
    msg = str(err.value)
    assert "http://***@127.0.0.1:1" in msg  # rwb's one redaction policy (retrieval.redact)
    assert "pw123" not in msg and "tok456" not in msg and "alice" not in msg
    assert redact_uri("https://u:p@h:19530/db?x=1") == "https://***@h:19530/db?x=1"
    idx.close()


def test_close_is_idempotent_and_frees_the_path(tmp_path: Path, ds: VectorDataset) -> None:
    idx = MilvusIndex(ds.dim, "l2", BUILD_KINDS["FLAT"](), workdir=tmp_path)
    idx.build(ds.base[:200])
    db = Path(idx.where)
    assert db.is_dir() and db.parent == tmp_path.resolve()
    idx.close()
    idx.close()
    assert not db.exists()
    with pytest.raises(BackendError, match="closed"):
        idx.search(ds.queries[:2], K)
    unbuilt = MilvusIndex(ds.dim, "l2")
    unbuilt.close()
    unbuilt.close()


def test_asearch_matches_search(built: Callable[[str], Built], ds: VectorDataset) -> None:
    idx, _ = built("HNSW")
    idx.set_search_params(ef=32)
    sync = idx.search(ds.queries[:20], K)

    async def fan_out() -> list[np.ndarray]:
        parts = await asyncio.gather(*(idx.asearch(ds.queries[i:i + 5], K)
                                       for i in range(0, 20, 5)))
        return [p.ids for p in parts]

    for _ in range(2):  # a new event loop each time gets its own async client
        assert np.array_equal(np.vstack(asyncio.run(fan_out())), sync.ids)


_SEGMENTS_SCRIPT = """
import json, numpy as np
from retrieval.engines.milvus.index import MilvusIndex
from retrieval.engines.milvus.params import IvfFlatBuild
from retrieval.loaders.synthetic import make_synthetic
ds = make_synthetic(3000, 32, 50, seed=0)
out = []
for _ in range(2):
    with MilvusIndex(32, "l2", IvfFlatBuild(nlist=16), insert_batch=250) as idx:
        info = idx.build(ds.base)
        idx.set_search_params(nprobe=1)
        ids = idx.search(ds.queries, 10).ids
        out.append({"segments": info.extra["segments"], "drained": info.extra["background_drained"],
                    "index_files": len(idx._lite_files()[1]), "ids": ids.tolist()})
print(json.dumps(out))
"""


def test_several_segments_are_indexed_and_deterministic(tmp_path: Path) -> None:
    """A small memtable limit makes Milvus Lite flush several segments (and compact some in the
    background); the build waits for that, indexes every segment, and answers the same twice.
    In a subprocess: Milvus Lite reads the limit at import."""
    env = {**os.environ, "MILVUS_LITE_MEMTABLE_MEMORY_LIMIT_BYTES": "60000",
           "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", _SEGMENTS_SCRIPT], env=env, timeout=120,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    a, b = json.loads(proc.stdout.strip().splitlines()[-1])
    assert a["segments"] > 1 and a["index_files"] == a["segments"] and a["drained"]
    assert a["ids"] == b["ids"] and a["segments"] == b["segments"]


def test_aclose_inside_the_loop(tmp_path: Path) -> None:
    ds = make_synthetic(300, 8, 4, seed=6)
    idx = MilvusIndex(ds.dim, "ip", BUILD_KINDS["FLAT"](), workdir=tmp_path)
    idx.build(ds.base)
    expected = idx.search(ds.queries, 3)

    async def use_then_close() -> np.ndarray:
        res = await idx.asearch(ds.queries, 3)
        await idx.aclose()
        return res.ids

    assert np.array_equal(asyncio.run(use_then_close()), expected.ids)
    with pytest.raises(BackendError, match="closed"):
        idx.search(ds.queries, 3)
    assert list(tmp_path.iterdir()) == []
    idx.close()
