"""Fan-out over collections served out of process, one Milvus Lite server each
(``servers: per-collection``): three server processes, and a parallel fan-out that waits on them
at once beats the serial one (modes interleaved in one run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")

from retrieval.bench.fanout.prepare import PreparedCollection, build_members
from retrieval.bench.fanout.retriever import FanOut
from retrieval.bench.fanout.spec import parse_fanout_spec
from retrieval.data import normalize_rows

pytestmark = [pytest.mark.milvus, pytest.mark.slow]


def test_per_collection_servers_make_fanout_waiting_bound(tmp_path: Path) -> None:
    hnsw = {"backend": "milvus", "server": True, "source": "scifact",
            "build": {"index_type": "HNSW", "M": 8, "efConstruction": 64}, "search": {"ef": 32}}
    spec = parse_fanout_spec({"k": 5, "servers": "per-collection",
                              "collections": [{"name": n, **hnsw} for n in ("a", "b", "c")]})
    rng = np.random.default_rng(0)
    prepared = [PreparedCollection(c, tuple(str(i) for i in range(800)),
                                   normalize_rows(rng.standard_normal((800, 16))
                                                  .astype(np.float32)), "synthetic", "-")
                for c in spec.collections]
    q = normalize_rows(rng.standard_normal((20, 16)).astype(np.float32))
    with build_members(spec, prepared, tmp_path) as (members, facts):
        assert [f["backend"] for f in facts] == ["milvus (own server)"] * 3
        uris = {m.index._uri for m in members}
        assert len(uris) == 3  # three server processes
        fan = FanOut(members, 5)
        ratios = []
        for _ in range(3):  # interleaved rounds; speedup = median of same-round ratios
            serial = fan.run(q, "serial", warmup=2)
            threads = fan.run(q, "threads", warmup=2)
            assert serial.failures() == {} and threads.failures() == {}
            ratios.append(np.median(serial.latency_ms) / np.median(threads.latency_ms))
            same = [[d for d, _ in a.fused] for a in serial.answers]
            assert same == [[d for d, _ in a.fused] for a in threads.answers]
        fan.close()
    assert float(np.median(ratios)) > 1.3, ratios
