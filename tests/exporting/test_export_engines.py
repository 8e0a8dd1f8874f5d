"""Each engine's own parameter names, validated against its own rules."""

import pytest

from retrieval.engines.faiss.export import check_faiss
from retrieval.errors import ConfigError
from retrieval.exporting.engines import translate
from retrieval.exporting.portable import Auto, Flat, Hnsw, Ivf, portable

HNSW = Hnsw(M=16, ef_construction=200, ef_search=64)
IVF = Ivf(nlist=256, nprobe=12)


def test_hnsw_in_every_engine():
    assert translate("milvus", HNSW, "cosine", 384, 10) == {
        "index_type": "HNSW", "metric_type": "COSINE",
        "params": {"M": 16, "efConstruction": 200},
        "search_params": {"metric_type": "COSINE", "params": {"ef": 64}},
    }
    f = translate("faiss", HNSW, "cosine", 384, 10)
    assert (f["index_factory"], f["parameter_space"]) == ("HNSW16", "efSearch=64")
    assert f["metric"] == "METRIC_INNER_PRODUCT" and f["normalize_vectors"] is True
    assert f["index_fields"] == {"hnsw.efConstruction": 200}
    assert translate("hnswlib", HNSW, "l2", 8, 10) == {
        "space": "l2", "dim": 8, "M": 16, "ef_construction": 200, "ef": 64}
    q = translate("qdrant", HNSW, "ip", 8, 10)
    body = q["create_collection"]  # production values: Qdrant's own optimizer defaults
    assert body["hnsw_config"] == {"m": 16, "ef_construct": 200, "on_disk": False}
    assert "optimizers_config" not in body and "search_params" not in body
    ms = q["measurement_settings"]  # what was measured: indexed, not brute-forced, labelled
    assert ms["optimizers_config"] == {"indexing_threshold": 1, "default_segment_number": 1}
    assert ms["hnsw_config"] == {"full_scan_threshold": 1} and "not for production" in ms["note"]
    assert q["search"]["params"]["hnsw_ef"] == 64 and body["vectors"]["distance"] == "Dot"
    w = translate("weaviate", HNSW, "l2", 8, 10)
    assert w == {"vectorIndexType": "hnsw", "vectorIndexConfig": {
        "maxConnections": 16, "efConstruction": 200, "ef": 64, "distance": "l2-squared"}}


def test_ivf_flat_and_auto():
    m = translate("milvus", IVF, "l2", 32, 10)
    assert m["index_type"] == "IVF_FLAT" and m["params"] == {"nlist": 256}
    assert m["search_params"]["params"] == {"nprobe": 12}
    f = translate("faiss", Ivf(64, 4, "pq", pq_m=8, refine=True, k_factor=4), "l2", 32, 10)
    assert f["index_factory"] == "IVF64,PQ8x8np,RFlat"
    assert f["parameter_space"] == "nprobe=4,k_factor_rf=4"
    assert translate("faiss", Flat(), "l2", 32, 10)["index_factory"] == "Flat"
    assert translate("milvus", Auto(), "l2", 32, 10)["index_type"] == "AUTOINDEX"


@pytest.mark.parametrize(
    "engine,p,match",
    [
        ("qdrant", IVF, "HNSW results"),
        ("weaviate", Flat(), "HNSW results"),
        ("faiss", Auto(), "AUTOINDEX"),
        ("milvus", Ivf(64, 4, "pq", pq_m=8), "IVF_FLAT and IVF_SQ8"),
        ("milvus", Hnsw(16, 200, 5), "ef.*>= k \\(10\\)"),
        ("hnswlib", Hnsw(16, 200, 5), "ef.*>= k \\(10\\)"),
        ("qdrant", Hnsw(16, 2, 64), "ef_construct.*>= 4"),
        ("milvus", Hnsw(4096, 200, 64), "M.*<= 2048"),
    ],
)
def test_rules_of_each_engine(engine, p, match):
    with pytest.raises(ConfigError, match=match):
        translate(engine, p, "l2", 32, 10)


def test_faiss_itself_checks_strings():
    base = {"metric": "METRIC_L2", "normalize_vectors": False, "dim": 32, "index_fields": {}}
    with pytest.raises(ConfigError, match=r"index_factory 'HNSWx'"):
        check_faiss({**base, "index_factory": "HNSWx", "parameter_space": ""})
    with pytest.raises(ConfigError, match=r"parameter_space 'nprobe=4'"):
        check_faiss({**base, "index_factory": "HNSW8", "parameter_space": "nprobe=4"})


def test_portable_reads_each_backend():
    hnsw = portable("hnswlib", {"M": 8, "ef_construction": 40}, {"ef_search": 20})
    assert hnsw == Hnsw(8, 40, 20)
    assert portable("milvus", {"index_type": "IVF_SQ8", "nlist": 64}, {"nprobe": 3}) == Ivf(
        64, 3, "sq8")
    with pytest.raises(ConfigError, match=r"no export mapping"):
        portable("fake", {}, {})
