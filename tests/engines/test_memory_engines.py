"""Quantized storage on the server engines, measured by the engines' own figures (issue 23):
Redis ``TYPE FLOAT16`` holds fewer bytes than FLOAT32 (FT.INFO + MEMORY USAGE), searches the
same, and its export carries the type and reads back."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval import memory
from retrieval.indexes import create_index

pytestmark = [pytest.mark.slow, pytest.mark.redis]

N, DIM = 3000, 64


@pytest.fixture()
def redis_env(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("REDIS_URL", redis_url)
    return redis_url


def test_redis_float16_halves_the_vectors_it_holds(redis_env: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    q = x[:40] + 0.01 * rng.standard_normal((40, DIM)).astype(np.float32)
    out = {}
    for vtype in ("FLOAT32", "FLOAT16"):
        ix = create_index("redis", DIM, "l2", {"TYPE": vtype, "M": 16, "EF_CONSTRUCTION": 64})
        try:
            ix.build(x)
            ix.set_search_params(EF_RUNTIME=64)
            top1 = ix.search(q, 10).ids[:, 0]
            out[vtype] = (memory.measure(ix, N), float((top1 == np.arange(40)).mean()))
        finally:
            ix.close()
    (r32, hit32), (r16, hit16) = out["FLOAT32"], out["FLOAT16"]
    assert hit16 >= hit32 - 0.05
    assert r32.resident_source.startswith("FT.INFO") and r16.flags == () and r32.flags == ()
    assert r16.extra["documents_bytes"] < r32.extra["documents_bytes"] - N * DIM  # 2 B/dim less
    assert r16.resident_bytes < r32.resident_bytes  # type: ignore[operator]


@pytest.fixture()
def pg_env(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RWB_PG_URL", pg_url)
    return pg_url


@pytest.mark.pgvector
def test_pgvector_halfvec_index_is_smaller_and_exports(pg_env: str) -> None:
    from retrieval.engines.pgvector.export import from_native, to_pgvector
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    q = x[:40] + 0.01 * rng.standard_normal((40, DIM)).astype(np.float32)
    out = {}
    for vtype in ("vector", "halfvec"):
        ix = create_index("pgvector", DIM, "cosine",
                          {"m": 16, "ef_construction": 64, "vector_type": vtype})
        try:
            info = ix.build(x)
            assert info.extra["plan"].startswith("Index Scan")  # the expression index is used
            ix.set_search_params(ef_search=64)
            top1 = ix.search(q, 10).ids[:, 0]
            out[vtype] = (memory.measure(ix, N), float((top1 == np.arange(40)).mean()))
            p = type(ix).portable(ix.build_params.model_dump(), {"ef_search": 64})
        finally:
            ix.close()
        cfg = to_pgvector(p, "cosine", DIM, 10)  # type: ignore[arg-type]
        back = from_native(cfg, "cosine", DIM, 10, "x.yaml")
        assert back.build.get("vector_type", "vector") == vtype
    (r32, hit32), (r16, hit16) = out["vector"], out["halfvec"]
    assert hit16 >= hit32 - 0.05
    assert r32.resident_source.startswith("pg_relation_size")
    # 2 bytes a dimension less in the index; the float32 table stays (the refine store on disk)
    assert r32.resident_bytes - r16.resident_bytes > 0.8 * N * DIM * 2  # type: ignore[operator]
    assert r16.refine_store == "disk" and r16.flags == ()
