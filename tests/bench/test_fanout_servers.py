"""Fan-out over collections served out of process, one Milvus Lite server each
(``servers: per-collection``): three server processes, the search work done in them (not in the
fan-out's process), and the same fused answers serially and with threads. The speedup itself is
printed by benchmarks/fanout_speedup.py (label ``milvus-servers``), not asserted: on 2 shared
cores Milvus Lite's server-side CPU (~2 ms a search) competes with everything else."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psutil
import pytest

pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")

from retrieval.bench.fanout.prepare import PreparedCollection, build_members
from retrieval.bench.fanout.retriever import FanOut
from retrieval.bench.fanout.spec import parse_fanout_spec, with_backend
from retrieval.data import normalize_rows

pytestmark = [pytest.mark.milvus, pytest.mark.slow]


def test_per_collection_servers(tmp_path: Path) -> None:
    hnsw = {"backend": "hnswlib", "source": "scifact"}
    base = parse_fanout_spec({"k": 5, "collections": [{"name": n, **hnsw} for n in "abc"]})
    spec = with_backend(base, "milvus", server=True, servers="per-collection",
                        build={"index_type": "HNSW", "M": 8, "efConstruction": 64},
                        search={"ef": 32})
    assert spec.servers == "per-collection" and spec.name.endswith("-milvus-servers")
    rng = np.random.default_rng(0)
    prepared = [PreparedCollection(c, tuple(str(i) for i in range(300)),
                                   normalize_rows(rng.standard_normal((300, 16))
                                                  .astype(np.float32)), "synthetic", "-")
                for c in spec.collections]
    q = normalize_rows(rng.standard_normal((8, 16)).astype(np.float32))
    with build_members(spec, prepared, tmp_path) as (members, facts):
        assert [f["backend"] for f in facts] == ["milvus (own server)"] * 3
        assert len({m.index._uri for m in members}) == 3
        servers = [p for p in psutil.Process().children(recursive=True)
                   if "milvus_lite" in " ".join(p.cmdline())]
        assert len(servers) == 3
        fan = FanOut(members, 5)
        serial = fan.run(q, "serial", warmup=2)
        threads = fan.run(q, "threads", warmup=2)
        fan.close()
    assert serial.failures() == {} and threads.failures() == {}
    assert [[d for d, _ in a.fused] for a in serial.answers] == \
        [[d for d, _ in a.fused] for a in threads.answers]
    assert {d.split("/")[0] for a in serial.answers for d, _ in a.fused} == {"a", "b", "c"}
    assert serial.child_cpu_s > 0  # the searching happened in the server processes
