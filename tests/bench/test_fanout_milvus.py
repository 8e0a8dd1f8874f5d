"""Fan-out with Milvus Lite members: the async client path, and a Milvus server that dies while
the fan-out is running (the other collection still answers; the failure is per collection)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason="pymilvus not installed (extra 'milvus')")
pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")

from retrieval.bench.fanout.retriever import MODES, FanOut, Member
from retrieval.data import normalize_rows
from retrieval.engines.milvus.index import MilvusIndex
from retrieval.engines.milvus.params import HnswBuild
from retrieval.engines.milvus.server import milvus_lite_server
from retrieval.indexes import create_index

pytestmark = [pytest.mark.milvus, pytest.mark.slow]


def _vectors(seed: int, n: int, dim: int = 16) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return normalize_rows(rng.standard_normal((n, dim)).astype(np.float32))


def test_milvus_server_killed_mid_run(tmp_path: Path) -> None:
    local, remote, q = _vectors(0, 400), _vectors(1, 400), _vectors(2, 6)
    hn = create_index("hnswlib", 16, "cosine")
    hn.build(local)
    keys = [str(i) for i in range(400)]
    with milvus_lite_server(tmp_path / "srv") as uri:
        mv = MilvusIndex(16, "cosine", HnswBuild(M=8, efConstruction=64), uri=uri,
                         connect_timeout_s=3.0)
        mv.build(remote)
        members = [Member("local", hn, 16, "cosine", keys, backend="hnswlib"),
                   Member("remote", mv, 16, "cosine", keys, backend="milvus", timeout_s=5.0)]
        fan = FanOut(members, 5)
        for mode in MODES:  # while the server lives, both answer (asyncio: AsyncMilvusClient)
            run = fan.run(q, mode)
            assert run.failures() == {}, mode
            assert {d.split("/")[0] for a in run.answers for d, _ in a.fused} == {"local",
                                                                                 "remote"}
    # the context exit stopped the server process: "remote" now fails, "local" answers
    try:
        for mode in MODES:
            run = fan.run(q[:2], mode)
            fails = run.failures()
            assert set(fails) == {"remote"}, mode
            assert fails["remote"]["errors"] + fails["remote"]["timeouts"] == 2
            for a in run.answers:
                assert a.answers["local"].ok and len(a.fused) == 5
                assert all(d.startswith("local/") for d, _ in a.fused)
    finally:
        fan.close(close_indexes=True)


def test_embedded_milvus_async_matches_sync(tmp_path: Path) -> None:
    x, q = _vectors(3, 500), _vectors(4, 8)
    mv = create_index("milvus", 16, "cosine", {"index_type": "FLAT"}, workdir=tmp_path)
    mv.build(x)
    flat = create_index("faiss-flat", 16, "cosine")
    flat.build(_vectors(5, 300))
    members = [Member("m", mv, 16, "cosine", [str(i) for i in range(500)], backend="milvus"),
               Member("f", flat, 16, "cosine", [str(i) for i in range(300)])]
    fan = FanOut(members, 10, fusion="score")
    try:
        runs = {mode: fan.run(q, mode, warmup=1) for mode in MODES}
        for i in range(len(q)):
            ref = [d for d, _ in runs["serial"].answers[i].fused]
            assert [d for d, _ in runs["asyncio"].answers[i].fused] == ref
            assert [d for d, _ in runs["threads"].answers[i].fused] == ref
    finally:
        fan.close(close_indexes=True)
