"""pgvector export in its own names and the way back (no server needed): the SQL a user runs is
what :func:`from_pgvector` reads, and an edited config fails naming the field."""

from __future__ import annotations

import copy

import pytest

from retrieval.engines.pgvector.export import from_pgvector, to_pgvector
from retrieval.errors import ConfigError
from retrieval.exporting.engines import translate
from retrieval.indexes.portable import Flat, Hnsw, Ivf


@pytest.mark.parametrize(("metric", "ops", "op"), [("l2", "vector_l2_ops", "<->"),
                                                   ("ip", "vector_ip_ops", "<#>"),
                                                   ("cosine", "vector_cosine_ops", "<=>")])
def test_hnsw_round_trip(metric, ops, op):
    doc = translate("pgvector", Hnsw(24, 96, 50), metric, 384, 10)
    assert doc["create_index"] == (f"CREATE INDEX ON items USING hnsw (embedding {ops}) "
                                   f"WITH (m = 24, ef_construction = 96);")
    assert doc["set"] == ["SET hnsw.ef_search = 50;"]
    assert f"ORDER BY embedding {op} $1 LIMIT 10" in doc["query"]
    back = from_pgvector(doc, k=10)
    assert (back.backend, back.metric, back.dim) == ("pgvector", metric, 384)
    assert back.build == {"m": 24, "ef_construction": 96} and back.search == {"ef_search": 50}
    assert back.portable == Hnsw(24, 96, 50)


def test_ivfflat_round_trip():
    doc = to_pgvector(Ivf(nlist=64, nprobe=8), "l2", 32, 10)
    assert "USING ivfflat (embedding vector_l2_ops) WITH (lists = 64)" in doc["create_index"]
    assert doc["set"] == ["SET ivfflat.probes = 8;"]
    back = from_pgvector(doc)
    assert back.backend == "pgvector-ivfflat" and back.portable == Ivf(64, 8)
    assert back.build == {"lists": 64} and back.search == {"probes": 8}


def _edited(doc, **changes):
    out = copy.deepcopy(doc)
    out.update(changes)
    return out


def test_edited_config_fails_naming_the_field():
    doc = to_pgvector(Hnsw(16, 64, 40), "l2", 32, 10)
    sql_m2 = doc["create_index"].replace("m = 16", "m = 2")
    with pytest.raises(ConfigError, match=r"config\.build_params"):  # SQL edited, fields not
        from_pgvector(_edited(doc, create_index=sql_m2))
    with pytest.raises(ConfigError, match=r"config\.search_params"):
        from_pgvector(_edited(doc, set=["SET hnsw.ef_search = 1;"]))
    with pytest.raises(ConfigError, match="field 'ef_search' must be >= k"):  # both, below k
        from_pgvector(_edited(doc, set=["SET hnsw.ef_search = 5;"],
                              search_params={"ef_search": 5}), k=10)
    sql_m101 = doc["create_index"].replace("m = 16", "m = 101")  # both edited, beyond limits
    with pytest.raises(ConfigError, match=r"config\.create_index\.m' must be <= 100"):
        from_pgvector(_edited(doc, create_index=sql_m101,
                              build_params={"m": 101, "ef_construction": 64}))
    with pytest.raises(ConfigError, match=r"config\.opclass"):
        from_pgvector(_edited(doc, opclass="vector_cosine_ops"))
    with pytest.raises(ConfigError, match=r"config\.create_index"):
        from_pgvector(_edited(doc, create_index="CREATE TABLE items ();"))
    with pytest.raises(ConfigError, match=r"config\.set"):
        from_pgvector(_edited(doc, set=["SET hnsw.ef_search = 40;", "SET jit = 0;"]))


def test_set_local_for_pooled_connections():
    from retrieval.engines.pgvector.export import from_native

    doc = to_pgvector(Hnsw(16, 64, 40), "l2", 32, 10)
    assert doc["set_local"]["sql"] == [
        "BEGIN;", "SET LOCAL hnsw.ef_search = 40;",
        "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 10;", "COMMIT;"]
    assert "pooled" in doc["set_local"]["note"]
    assert from_native(doc, "l2", 32, 10, "f.yaml").search == {"ef_search": 40}
    old = {k: v for k, v in doc.items() if k != "set_local"}  # a file from before: still read
    assert from_native(old, "l2", 32, 10, "f.yaml").search == {"ef_search": 40}
    edited = copy.deepcopy(doc)
    edited["set_local"]["sql"][1] = "SET LOCAL hnsw.ef_search = 80;"
    with pytest.raises(ConfigError, match=r"config\.set_local\.sql"):
        from_native(edited, "l2", 32, 10, "f.yaml")


@pytest.mark.parametrize(("p", "word"), [
    (Hnsw(16, 64, 40, quantization="SQ8"), "SQ8"),
    (Ivf(64, 8, encoding="pq", pq_m=8), "IVFFlat"),
    (Flat(), "HNSW and IVFFlat"),
    (Hnsw(16, 20, 40), "ef_construction"),   # < 2 * m
    (Hnsw(101, 300, 40), "build_params.m' must be <= 100"),
    (Hnsw(16, 64, 5), "ef_search"),           # < k
    (Ivf(64, 65), "probes"),                   # > lists
])
def test_what_pgvector_cannot_take_is_one_line(p, word):
    with pytest.raises(ConfigError) as e:
        to_pgvector(p, "l2", 32, 10)
    assert word in str(e.value) and "\n" not in str(e.value)


def test_dimension_limit():
    with pytest.raises(ConfigError, match="2000"):
        to_pgvector(Hnsw(16, 64, 40), "l2", 2001, 10)
