"""Quantization and rescoring knobs in each engine's own names, validated in one line, and
carried by the exports (issue 23 items 1 and 5). No server needed."""

from __future__ import annotations

import pytest

from retrieval.engines.faiss.export import from_faiss, to_faiss
from retrieval.engines.faiss.ivf import FaissIvfIndex, IvfBuild, IvfSearch
from retrieval.engines.pgvector.export import from_native as from_pg
from retrieval.engines.pgvector.export import to_pgvector
from retrieval.engines.qdrant.export import to_qdrant
from retrieval.engines.qdrant.params import QdrantBuild, QdrantSearch, check_search
from retrieval.engines.redis.export import from_redis, to_redis
from retrieval.engines.redis.index import RedisIndex
from retrieval.errors import ConfigError
from retrieval.indexes.portable import Hnsw
from retrieval.params import validate_params
from tests.helpers import one_line


def test_qdrant_oversampling_below_one_is_refused() -> None:
    with pytest.raises(ConfigError) as exc:
        validate_params(QdrantSearch, {"oversampling": 0.5}, where="qdrant search params")
    assert "oversampling" in one_line(exc) and "0.5" in one_line(exc)


def test_qdrant_oversampling_without_rescore_is_refused() -> None:
    build = QdrantBuild(quantization="scalar")
    with pytest.raises(ConfigError) as exc:
        check_search(build, QdrantSearch(oversampling=2.0, rescore=False), 10)
    assert "rescore is false" in one_line(exc)
    check_search(build, QdrantSearch(oversampling=2.0, rescore=True), 10)


def test_faiss_k_factor_without_a_refine_store_is_refused() -> None:
    with pytest.raises(ConfigError) as exc:
        FaissIvfIndex.check_combination(IvfBuild(nlist=8, encoding="rabitq"),
                                        IvfSearch(nprobe=2, k_factor=4), 10)
    assert "k_factor" in one_line(exc) and "refine" in one_line(exc)


@pytest.mark.parametrize("encoding,code", [("sq4", "SQ4"), ("rabitq", "RaBitQ")])
def test_faiss_factory_strings_round_trip(encoding: str, code: str) -> None:
    build = {"nlist": 64, "encoding": encoding, "refine": True}
    assert FaissIvfIndex.factory_string(IvfBuild(**build)) == f"IVF64,{code},RFlat"
    p = FaissIvfIndex.portable(build, {"nprobe": 8, "k_factor": 4})
    cfg = to_faiss(p, "cosine", 64, 10)
    assert cfg["index_factory"] == f"IVF64,{code},RFlat"
    assert cfg["parameter_space"] == "nprobe=8,k_factor_rf=4"
    back = from_faiss(cfg, "cosine", 64, 10, "x.yaml")
    assert back.build == build and back.search == {"nprobe": 8, "k_factor": 4}


def test_redis_float16_export_round_trip() -> None:
    build = {"algorithm": "HNSW", "TYPE": "FLOAT16", "M": 16, "EF_CONSTRUCTION": 64,
             "EPSILON": 0.01}
    p = RedisIndex.portable(build, {"EF_RUNTIME": 32})
    cfg = to_redis(p, "cosine", 64, 10)
    assert "TYPE FLOAT16" in cfg["ft_create"]
    back = from_redis(cfg, "cosine", 64, 10, "x.yaml")
    assert back.build["TYPE"] == "FLOAT16" and back.search == {"EF_RUNTIME": 32}


def test_pgvector_halfvec_export_round_trip_and_edits() -> None:
    cfg = to_pgvector(Hnsw(16, 64, 40, "FP16"), "l2", 384, 10)
    assert cfg["create_index"].startswith(
        "CREATE INDEX ON items USING hnsw ((embedding::halfvec(384)) halfvec_l2_ops)")
    assert "ORDER BY (embedding::halfvec(384)) <-> $1::halfvec(384)" in cfg["query"]
    back = from_pg(cfg, "l2", 384, 10, "x.yaml")
    assert back.build == {"m": 16, "ef_construction": 64, "vector_type": "halfvec"}
    wrong_dim = {**cfg, "create_index": cfg["create_index"].replace("(384)", "(128)")}
    with pytest.raises(ConfigError, match="create_index"):
        from_pg(wrong_dim, "l2", 384, 10, "x.yaml")
    plain = to_pgvector(Hnsw(16, 64, 40), "l2", 384, 10)
    assert "halfvec" not in plain["create_index"]
    assert from_pg(plain, "l2", 384, 10, "x.yaml").build == {"m": 16, "ef_construction": 64}


def test_an_encoding_an_engine_lacks_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as exc:
        to_qdrant(Hnsw(16, 64, 40, "FP16"), "cosine", 64, 10)
    assert "FP16" in one_line(exc)
    with pytest.raises(ConfigError) as exc:
        to_pgvector(Hnsw(16, 64, 40, "SQ8"), "cosine", 64, 10)
    assert "SQ8" in one_line(exc)
