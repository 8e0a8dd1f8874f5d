"""Each engine's inverse reads back exactly what its exporter wrote (engine config -> rwb backend
params -> the same neutral form), and a config outside the engine's rules is one line naming
``config.<field>``."""

from __future__ import annotations

import pytest

from retrieval.errors import ConfigError
from retrieval.exporting.engines import translate
from retrieval.exporting.inverse import INVERSES, inverse_for
from retrieval.exporting.portable import Flat, Hnsw, Ivf, portable
from retrieval.indexes.registry import get_backend

CASES = [
    ("hnswlib", Hnsw(12, 80, 40), "l2"),
    ("faiss", Hnsw(12, 80, 40), "cosine"),
    ("faiss", Ivf(64, 4, "pq", pq_m=8, refine=True, k_factor=4), "l2"),
    ("faiss", Ivf(64, 4, "sq8"), "ip"),
    ("faiss", Flat(), "l2"),
    ("milvus", Hnsw(12, 80, 40), "cosine"),
    ("milvus", Ivf(64, 4), "l2"),
    ("qdrant", Hnsw(12, 80, 40), "ip"),
    ("qdrant", Hnsw(12, 80, 40, "PQ", native_engine="qdrant",
                    native=(("pq_compression", "x16"), ("rescore", True),
                            ("oversampling", 3.0))), "l2"),
    ("redis", Hnsw(12, 80, 40, native_engine="redis", native=(("EPSILON", 0.05),)), "cosine"),
    ("redis", Flat(), "l2"),
]


def _neutral(p):
    if isinstance(p, Hnsw):
        return (p.M, p.ef_construction, p.ef_search, p.quantization, dict(p.native))
    if isinstance(p, Ivf):
        return (p.nlist, p.nprobe, p.encoding, p.pq_m, p.refine, p.k_factor)
    return type(p).__name__


@pytest.mark.parametrize(("engine", "p", "metric"), CASES,
                         ids=[f"{e}-{type(p).__name__}-{m}" for e, p, m in CASES])
def test_inverse_reads_back_what_the_export_wrote(engine, p, metric):
    cfg = translate(engine, p, metric, 32, 10)
    back = INVERSES[engine](cfg, metric, 32, 10, "f.yaml")
    cls = get_backend(back.backend)
    build = cls.BuildParams.model_validate(back.build).model_dump(mode="json")
    search = cls.SearchParams.model_validate(back.search).model_dump(mode="json")
    again = portable(back.backend, build, search)
    got, want = _neutral(again), _neutral(p)
    if isinstance(p, Hnsw) and engine != p.native_engine:
        got, want = got[:4], want[:4]  # native params only travel to their own engine
    elif isinstance(p, Hnsw):
        assert dict(again.native).items() >= dict(p.native).items()
        got, want = got[:4], want[:4]
    assert got == want
    assert translate(engine, again, metric, 32, 10) == cfg  # and exports to the same file


@pytest.mark.parametrize(("engine", "edit", "needle"), [
    ("qdrant", lambda c: c["create_collection"]["hnsw_config"].update(m=1),
     "config.create_collection.hnsw_config.m"),
    ("qdrant", lambda c: c["create_collection"]["vectors"].update(distance="Euclid"),
     "config.vectors.distance"),
    ("qdrant", lambda c: c["search"]["params"].update(hnsw_ef=3),
     "config.search_params.hnsw_ef"),
    ("qdrant", lambda c: c["measurement_settings"].update(
        optimizers_config={"indexing_threshold": 0}),
     "config.measurement_settings.optimizers_config.indexing_threshold"),
    ("qdrant", lambda c: c["create_collection"].update(
        optimizers_config={"indexing_threshold": 20000}),
     "config.create_collection.optimizers_config.indexing_threshold"),
    ("qdrant", lambda c: c["create_collection"].update(
        quantization_config={"scalar": {}, "binary": {}}), "config.quantization_config"),
    ("qdrant", lambda c: c["create_collection"]["hnsw_config"].update(ef_construct_typo=3),
     "config.create_collection.hnsw_config.ef_construct_typo"),
    ("qdrant", lambda c: c.update(search_params={"hnsw_ef": 40}), "config.search_params"),
    ("redis", lambda c: c["vector_field"]["attributes"].update(M=5000),
     "config.vector_field.attributes.M"),
    ("redis", lambda c: c["query_params"].update(EF_RUNTIME=2), "config.query_params.EF_RUNTIME"),
    ("redis", lambda c: c.update(ft_create=c["ft_create"].replace("M 12", "M 13")),
     "config.ft_create"),
    ("redis", lambda c: c.update(ft_search=c["ft_search"].replace("DIALECT 2", "")),
     "config.ft_search"),
    ("redis", lambda c: c.update(dialect=1), "config.dialect"),
    ("hnswlib", lambda c: c.update(dim=31), "config.dim"),
    ("milvus", lambda c: c["params"].update(M=-3), "config.params.M"),
    ("faiss", lambda c: c.update(index_factory="IVF64,PQ8x8fs"), "index_factory"),
])
def test_a_config_outside_the_rules_is_one_line(engine, edit, needle):
    cfg = translate(engine, Hnsw(12, 80, 40) if engine != "faiss" else Ivf(64, 4), "cosine",
                    32, 10)
    edit(cfg)
    with pytest.raises(ConfigError) as e:
        INVERSES[engine](cfg, "cosine", 32, 10, "f.yaml")
    text = str(e.value)
    assert "\n" not in text and text.startswith("f.yaml") and needle in text, text


def test_weaviate_has_no_inverse_and_pgvector_is_the_plug_in_point():
    assert inverse_for("weaviate") is None
    assert set(INVERSES) >= {"hnswlib", "faiss", "milvus", "qdrant", "redis"}
