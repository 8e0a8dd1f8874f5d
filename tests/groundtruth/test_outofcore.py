"""Out-of-core data (issue 21): memory-mapped loaders, chunked ground truth with rwb's tie
rule, checkpoint resume after a kill, shards claimed by file locks, the fingerprint cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval import data as rdata
from retrieval.data import VectorDataset, base_chunks
from retrieval.groundtruth.exact import exact_knn, ground_truth
from retrieval.groundtruth.ooc import (
    _lock,
    claim_shards,
    exact_topk,
    merge_shards,
    plan_shards,
    to_rwb_distances,
    work_dir,
)
from retrieval.loaders.vectors import load_npy, load_texmex, write_fvecs


def _data(kind: str, n: int = 6000, dim: int = 16, nq: int = 120) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    if kind == "ties":  # small integers: many exactly equal distances at the k-th place
        return (rng.integers(0, 3, (n, 8)).astype(np.float32),
                rng.integers(0, 3, (nq, 8)).astype(np.float32))
    return (rng.standard_normal((n, dim)).astype(np.float32),
            rng.standard_normal((nq, dim)).astype(np.float32))


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
@pytest.mark.parametrize("kind", ["float", "ties"])
def test_out_of_core_ground_truth_equals_in_memory(tmp_path: Path, metric: str,
                                                   kind: str) -> None:
    base, queries = _data(kind)
    np.save(tmp_path / "b.npy", base)
    np.save(tmp_path / "q.npy", queries)
    ds = load_npy(tmp_path / "b.npy", tmp_path / "q.npy", metric)  # type: ignore[arg-type]
    assert ds.out_of_core
    ref = exact_knn(base, queries, metric, 100)  # type: ignore[arg-type]
    # rwb's tie rule: among equal distances the smaller id comes first and is kept
    ids_order = np.lexsort((ref.ids, ref.distances), axis=-1)
    assert (ids_order == np.arange(100)).all()
    got = ground_truth(ds, 10, cache=tmp_path / "gt", shards=3)
    assert np.array_equal(got.ids, ref.ids) and np.array_equal(got.distances, ref.distances)
    keys, ids = exact_topk(base, queries, metric, 100, rows=1024)  # type: ignore[arg-type]
    assert np.array_equal(ids, ref.ids)
    assert np.array_equal(to_rwb_distances(keys, ids, metric), ref.distances)  # type: ignore[arg-type]


def test_ties_keep_the_smallest_ids() -> None:
    base = np.zeros((3000, 4), np.float32)  # every row at the same distance
    q = np.ones((2, 4), np.float32)
    for metric in ("l2", "ip"):
        assert (exact_knn(base, q, metric, 5).ids == np.arange(5)).all()  # type: ignore[arg-type]
        _, ids = exact_topk(base, q, metric, 5, rows=1024)  # type: ignore[arg-type]
        assert (ids == np.arange(5)).all()


KILLER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import numpy as np
    from retrieval.groundtruth.ooc import exact_topk
    base = np.load(sys.argv[1], mmap_mode="r"); q = np.load(sys.argv[2])
    def hook(done, total):
        if done >= 3 * 1024:
            os.kill(os.getpid(), signal.SIGKILL)  # a real kill, mid-computation
    exact_topk(base, q, "l2", 20, rows=1024, checkpoint=Path(sys.argv[3]), on_chunk=hook)
""")


def test_checkpoint_resumes_after_kill(tmp_path: Path) -> None:
    base, queries = _data("float")
    np.save(tmp_path / "b.npy", base)
    np.save(tmp_path / "q.npy", queries)
    ckpt = tmp_path / "part.npz"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-c", KILLER, str(tmp_path / "b.npy"),
                           str(tmp_path / "q.npy"), str(ckpt)], env=env, timeout=120)
    assert proc.returncode == -9 and ckpt.is_file()
    with np.load(ckpt) as z:
        assert int(z["next"]) == 3 * 1024
    seen: list[int] = []
    _, ids = exact_topk(base, queries, "l2", 20, rows=1024, checkpoint=ckpt,
                           on_chunk=lambda done, total: seen.append(done))
    assert seen[0] == 4 * 1024  # resumed after the third chunk, not from row 0
    assert np.array_equal(ids, exact_knn(base, queries, "l2", 20).ids)


def test_shards_held_by_another_worker_are_left_then_taken_over(tmp_path: Path) -> None:
    base, queries = _data("float")
    ds = VectorDataset("s", base, queries, "l2")
    plan = plan_shards(ds.n_base, 3)
    assert [s.lo % 1024 for s in plan] == [0, 0, 0] and plan[-1].hi == ds.n_base
    folder = work_dir(tmp_path, ds, 10, len(plan))
    folder.mkdir(parents=True)
    with _lock(folder / "shard-1.lock", wait=False) as held:  # "another worker" holds shard 1
        assert held
        assert claim_shards(ds, 10, folder, plan, wait=False) is False
        assert sorted(p.name for p in folder.glob("shard-?.npz")) == ["shard-0.npz",
                                                                     "shard-2.npz"]
    assert claim_shards(ds, 10, folder, plan, wait=False) is True  # its worker is gone
    _, ids = merge_shards(folder, plan, 10)
    assert np.array_equal(ids, exact_knn(base, queries, "l2", 10).ids)


def test_fingerprint_is_cached_by_path_size_and_mtime(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RWB_CACHE_DIR", str(tmp_path / "cache"))
    base, queries = _data("float")
    np.save(tmp_path / "b.npy", base)
    np.save(tmp_path / "q.npy", queries)
    first = load_npy(tmp_path / "b.npy", tmp_path / "q.npy", "l2").fingerprint
    assert first == VectorDataset("x", base, queries, "l2").fingerprint  # same bytes, same hash

    def no_hash(self: VectorDataset) -> str:
        raise AssertionError("the full hash ran again")

    monkeypatch.setattr(VectorDataset, "_sha256", no_hash)
    assert load_npy(tmp_path / "b.npy", tmp_path / "q.npy", "l2").fingerprint == first
    changed = base.copy()
    changed[0, 0] += 1
    np.save(tmp_path / "b.npy", changed)
    os.utime(tmp_path / "b.npy", ns=(1, 1))  # a new mtime (and the same size): a new key
    monkeypatch.undo()
    monkeypatch.setenv("RWB_CACHE_DIR", str(tmp_path / "cache"))
    assert load_npy(tmp_path / "b.npy", tmp_path / "q.npy", "l2").fingerprint != first
    saved = list((tmp_path / "cache" / "fingerprints").glob("*.json"))
    assert len(saved) == 2 and "b.npy" in json.loads(saved[0].read_text())["key"]


@pytest.mark.parametrize("how", ["copy2", "replace"])
def test_a_file_replaced_with_the_same_size_and_mtime_gets_a_new_fingerprint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Issue 34 HIGH 3: ``cp -p`` / ``touch -r`` keep size and mtime; the cache key must not
    (inode and ctime are not the user's to set)."""
    monkeypatch.setenv("RWB_CACHE_DIR", str(tmp_path / "cache"))
    base, queries = _data("float")
    np.save(tmp_path / "b.npy", base)
    np.save(tmp_path / "q.npy", queries)
    first = load_npy(tmp_path / "b.npy", tmp_path / "q.npy", "l2").fingerprint
    old = (tmp_path / "b.npy").stat()
    changed = base.copy()
    changed[0, 0] += 1
    np.save(tmp_path / "other.npy", changed)
    os.utime(tmp_path / "other.npy", ns=(old.st_atime_ns, old.st_mtime_ns))
    time.sleep(0.05)  # ctime moves on a coarse clock
    if how == "copy2":  # cp -p onto the file (same inode)
        shutil.copy2(tmp_path / "other.npy", tmp_path / "b.npy")
    else:  # rsync -a style: a new file renamed over it
        os.replace(tmp_path / "other.npy", tmp_path / "b.npy")
    now = (tmp_path / "b.npy").stat()
    assert (now.st_size, now.st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    again = load_npy(tmp_path / "b.npy", tmp_path / "q.npy", "l2").fingerprint
    assert again != first
    assert again == VectorDataset("x", changed, queries, "l2").fingerprint


def test_a_synthetic_base_checks_free_disk_and_leaves_no_tmp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34 MEDIUM 7: free space is checked before the base is written (a disk filling
    ended in SIGBUS), and a write that fails leaves no ``*.tmp.npy`` in the cache."""
    from collections import namedtuple

    import retrieval.loaders.synthetic as syn
    from retrieval.errors import DataError
    from retrieval.loaders.synthetic import make_synthetic

    monkeypatch.setenv("RWB_CACHE_DIR", str(tmp_path))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(syn.shutil, "disk_usage", lambda _p: usage(10**6, 10**6 - 1000, 1000))
    with pytest.raises(DataError, match=r"needs 324,096 bytes .* only 1,000 are free"):
        make_synthetic(5000, 16, 10, chunk_rows=2048)
    monkeypatch.undo()
    monkeypatch.setenv("RWB_CACHE_DIR", str(tmp_path))

    def full(_x: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(syn, "release_pages", full)
    with pytest.raises(OSError, match="No space left"):
        make_synthetic(5000, 16, 10, chunk_rows=2048, seed=5)
    assert list(tmp_path.rglob("*.tmp.npy")) == []


def test_fvecs_base_is_mapped_and_builds_in_chunks(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    base, queries = _data("float", n=5000)
    write_fvecs(tmp_path / "b.fvecs", base)
    write_fvecs(tmp_path / "q.fvecs", queries)
    ds = load_texmex(tmp_path / "b.fvecs", tmp_path / "q.fvecs")
    assert ds.out_of_core and np.array_equal(np.asarray(ds.base), base)
    monkeypatch.setattr(rdata, "CHUNK_BYTES", 1024 * 16 * 4)  # 1024-row chunks
    assert [lo for lo, _ in base_chunks(ds)] == [0, 1024, 2048, 3072, 4096]
    from retrieval.indexes.registry import create_index

    built = {}
    for name, x in (("mapped", ds.base), ("memory", base)):
        idx = create_index("hnswlib", 16, "l2", {"M": 8, "ef_construction": 40})
        idx.build(x)
        idx.set_search_params(ef_search=20)
        built[name] = idx.search(queries, 10).ids
    assert np.array_equal(built["mapped"], built["memory"])  # one thread: the same graph


def test_chunked_synthetic_is_deterministic(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RWB_CACHE_DIR", str(tmp_path))
    from retrieval.loaders.synthetic import make_synthetic

    a = make_synthetic(5000, 16, 10, chunk_rows=1024)
    (tmp_path / "synthetic").rename(tmp_path / "moved")  # regenerated from scratch
    b = make_synthetic(5000, 16, 10, chunk_rows=1024)
    assert a.out_of_core and np.array_equal(np.asarray(a.base), np.asarray(b.base))
    assert a.fingerprint == b.fingerprint
    assert make_synthetic(5000, 16, 10, chunk_rows=2048).fingerprint != a.fingerprint


RSS_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np
    import retrieval.data as rdata
    from retrieval.groundtruth.exact import ground_truth
    from retrieval.groundtruth.ooc import exact_topk
    from retrieval.loaders.vectors import load_npy
    mode, base, queries, cache = sys.argv[1:5]
    rdata.CHUNK_BYTES = 4 << 20  # 4 MB chunks: the file is many chunks
    if mode == "topk":  # the chunked search alone, over a plain memory map
        _, ids = exact_topk(np.load(base, mmap_mode="r"), np.load(queries), "l2", 10)
    else:  # the whole path: loader (finiteness check), fingerprint, out-of-core ground truth
        ids = ground_truth(load_npy(base, queries, "l2"), 10, cache=Path(cache)).ids
    # VmHWM: this process's own peak (ru_maxrss keeps the pytest parent's size across exec)
    with open("/proc/self/status") as fh:
        peak = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:")) * 1024
    print(json.dumps({"peak": peak, "ids": np.asarray(ids).tolist()}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM in /proc/self/status "
                    "and madvise(MADV_DONTNEED) releasing file pages: Linux")
@pytest.mark.parametrize("mode", ["topk", "pipeline"])
def test_out_of_core_peak_rss_does_not_grow_with_the_file(tmp_path: Path, mode: str) -> None:
    """A 51 MB mapped base read in 4 MB chunks: the peak resident size of a process computing
    its ground truth exceeds that of the same computation over one chunk's worth of rows by
    well under the file size (file pages touched through the map count as resident; each
    chunk's are released once it is consumed)."""
    rng = np.random.default_rng(5)
    big = rng.standard_normal((200_000, 64)).astype(np.float32)  # 51.2 MB
    queries = rng.standard_normal((50, 64)).astype(np.float32)
    np.save(tmp_path / "big.npy", big)
    np.save(tmp_path / "small.npy", big[:16_384])  # one 4 MB chunk
    np.save(tmp_path / "q.npy", queries)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "RWB_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}

    def child(base: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-c", RSS_CHILD, mode, str(tmp_path / base),
                               str(tmp_path / "q.npy"), str(tmp_path / f"gt-{base}")],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    small, full = child("small.npy"), child("big.npy")
    depth = np.asarray(full["ids"]).shape[1]  # the pipeline stores rwb's ground-truth depth
    assert np.array_equal(full["ids"], exact_knn(big, queries, "l2", depth).ids)
    growth = full["peak"] - small["peak"]
    assert growth < 0.5 * big.nbytes, (growth, big.nbytes)


def test_take_rows_and_released_pages_keep_the_data(tmp_path: Path) -> None:
    base, _ = _data("float", n=20_000)
    np.save(tmp_path / "b.npy", base)
    mm = np.load(tmp_path / "b.npy", mmap_mode="r")
    rows = np.random.default_rng(2).permutation(20_000)[:7000]  # unsorted ids
    got = rdata.take_rows(mm, rows)
    assert got.dtype == base.dtype and np.array_equal(got, base[rows])
    assert np.array_equal(rdata.take_rows(base, rows), base[rows])  # in memory: plain indexing
    rdata.release_pages(mm[100:9000])
    rdata.release_pages(base[100:9000])  # not mapped: a no-op
    assert np.array_equal(np.asarray(mm), base)  # released pages read back the same bytes
    assert rdata._shared_map(mm[10:20]) is not None
    assert rdata._shared_map(np.load(tmp_path / "b.npy", mmap_mode="c")) is None  # private
