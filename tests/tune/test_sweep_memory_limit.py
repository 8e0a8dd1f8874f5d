"""A sweep over an npy base larger than the memory the process may allocate (issue 21).

The limit is ``RLIMIT_DATA`` (``resource.setrlimit``), not ``prlimit --as``: the address-space
limit also counts the read-only memory map of the base file (and Faiss/OpenMP reserve hundreds
of MB of address space), so an ``--as`` limit below the base refuses the map itself. Since Linux
4.7 ``RLIMIT_DATA`` counts private writable memory (heap, anonymous maps) and not read-only file
maps: exactly "what rwb allocates". The child measures what the interpreter with rwb, Faiss,
Optuna and pandas imported (and BLAS's and pyarrow's reservations made by a first product and
a first Parquet write) already holds
(VmData), then allows only half the base's size beyond it, checks that loading the base whole
now fails, and runs the sweep (one build thread: a second OpenMP thread reserves its own BLAS
buffers).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="RLIMIT_DATA counts anonymous memory only on Linux")]

N, DIM, NQ = 520_000, 96, 60

CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import faiss, optuna, pandas  # noqa: F401  (what the sweep imports, before the limit)
    import retrieval.api, retrieval.tune.sweep  # noqa: F401
    from retrieval.cli import main

    def vmdata():
        for line in open("/proc/self/status"):
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    # warm up: BLAS reserves its buffers (~150 MB of address space) at the first product
    warm = faiss.index_factory(96, "IVF16,PQ8", faiss.METRIC_L2)
    warm.train(np.random.default_rng(0).normal(size=(4096, 96)).astype("float32"))
    del warm
    import io  # pyarrow's allocator reserves its arenas at the first table written
    pandas.DataFrame({"a": [1.0]}).to_parquet(io.BytesIO())
    base_bytes = int(sys.argv[3])
    before = vmdata()
    limit = before + base_bytes // 2
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    try:
        np.load(sys.argv[2])
        whole = "loaded"
    except MemoryError:
        whole = "MemoryError"
    code = main(["sweep", sys.argv[1], "--out", sys.argv[4], "--json"])
    print(json.dumps({"vmdata_before": before, "limit": limit, "whole_load": whole,
                      "code": code}), file=sys.stderr)
""")


def _write_base(folder: Path) -> tuple[Path, Path]:
    """A clustered float32 base written in chunks (never whole in this process either)."""
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(64, DIM)).astype(np.float32) * 4
    base = folder / "base.npy"
    out = np.lib.format.open_memmap(base, mode="w+", dtype=np.float32, shape=(N, DIM))
    for lo in range(0, N, 100_000):
        m = min(N, lo + 100_000) - lo
        out[lo:lo + m] = centres[rng.integers(0, 64, m)] + rng.normal(size=(m, DIM))
    out.flush()
    del out
    queries = folder / "queries.npy"
    np.save(queries, (centres[rng.integers(0, 64, NQ)]
                      + rng.normal(size=(NQ, DIM))).astype(np.float32))
    return base, queries


def test_sweep_over_base_larger_than_memory_limit(tmp_path: Path) -> None:
    base, queries = _write_base(tmp_path)
    spec = tmp_path / "ooc.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "ooc-limit",
        "dataset": {"kind": "npy", "base": str(base), "queries": str(queries), "metric": "l2"},
        "k": 10, "warmup": 2, "batch_repeats": 1, "target_recall": 0.5,
        "indexes": [{"backend": "faiss-ivf",
                     "build": {"nlist": 256, "encoding": "pq", "pq_m": 8,
                               "train_size": 16_384},
                     "search": {"nprobe": [1, 4, 16]}}],
        "tune": {"strategy": "grid", "heldout_fraction": 0.0},
        # one build thread: a second OpenMP thread reserves its own BLAS buffers (~150 MB)
        "index_build": {"threads": 1},
    }))
    cache = tmp_path / "cache"
    env = {"RWB_CACHE_DIR": str(cache), "RWB_INDEX_CACHE_DIR": str(cache / "index"),
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CHILD, str(spec), str(base),
                           str(N * DIM * 4), str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    assert last.startswith("{"), f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    facts = json.loads(last)
    assert facts["whole_load"] == "MemoryError", facts  # the limit binds: no room for the base
    assert facts["limit"] - facts["vmdata_before"] < N * DIM * 4
    assert facts["code"] == 0, proc.stderr[-3000:]
    # exact ground truth: the cached file equals an exact search of the base
    from retrieval.groundtruth.exact import exact_knn

    gt_files = list((cache / "groundtruth").glob("*.npz"))
    assert len(gt_files) == 1
    with np.load(gt_files[0]) as z:
        ids = z["ids"]
    mm = np.load(base, mmap_mode="r")
    ref = exact_knn(np.asarray(mm), np.load(queries), "l2", ids.shape[1])
    assert np.array_equal(ids, ref.ids)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset"]["out_of_core"] is True
    assert manifest["dataset"]["on_disk_bytes"] >= N * DIM * 4
    assert {"ground_truth", "build", "search"} <= set(manifest["resources"]["phases"])
