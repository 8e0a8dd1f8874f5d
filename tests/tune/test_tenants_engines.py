"""Tenant layouts on more engines (issue 31, item 4): the shared layout through LanceDB's
``where`` (prefilter), Milvus Lite's partition key and Redis's TAG filter. Every id a tenant
filter returns belongs to the query's tenant; per-tenant recall equals a brute force per tenant
(the helpers of test_tenants.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.filtering.attrs import Attributes, LabelColumn
from retrieval.filtering.rows import RowFilter
from retrieval.filtering.spec import Where
from retrieval.indexes.base import SupportsFilter
from retrieval.indexes.registry import create_index
from tests.tune.test_tenants_run import _check_against_brute_force, _run

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

K = 10
TENANTS = {"count": 8, "sizes": {"zipf": 1.1}, "min_queries": 3}


def _labels(n: int, count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([f"t{i}" for i in range(count)])[rng.integers(0, count, n)]


def _foreign(index: SupportsFilter, x: np.ndarray, labels: np.ndarray, ids: np.ndarray) -> int:
    """Every tenant's filtered top-k of 5 queries: the number of ids of another tenant
    (asserting each tenant got min(k, its size) ids)."""
    owner = dict(zip(ids.tolist(), labels.tolist(), strict=True))
    foreign = 0
    for t in np.unique(labels):
        where = Where(attr="tenant", eq=str(t))
        found = index.filtered_search(x[:5], K, RowFilter(where, labels == t)).ids
        size = int((labels == t).sum())
        for row in found:
            got = [int(i) for i in row if i >= 0]
            assert len(got) == min(K, size)
            foreign += sum(owner[i] != t for i in got)
    return foreign


def test_lancedb_where_never_returns_another_tenants_id(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1500, 16)).astype(np.float32)
    labels = _labels(1500, 6)
    ids = np.arange(1500, dtype=np.int64) * 5 + 11
    idx = create_index("lancedb-hnsw", 16, "l2", {"num_partitions": 1, "m": 8})
    assert isinstance(idx, SupportsFilter)
    try:
        idx.attach_attributes(Attributes(1500, {}, {"tenant": LabelColumn.from_rows(
            labels.tolist())}, tenant="tenant"))
        info = idx.build(x, ids)
        assert info.extra["scalar_indexes"] == ["a_tenant"]
        idx.set_search_params(ef=40)
        assert _foreign(idx, x, labels, ids) == 0
    finally:
        idx.close()


def test_lancedb_refuses_several_labels_a_row_in_one_line() -> None:
    from retrieval.errors import ConfigError

    idx = create_index("lancedb-ivfpq", 16, "l2", {"num_partitions": 2, "num_sub_vectors": 4})
    assert isinstance(idx, SupportsFilter)
    col = LabelColumn.from_rows([["a", "b"], ["a"]])
    with pytest.raises(ConfigError, match="exactly one label a row"):
        idx.attach_attributes(Attributes(2, {}, {"topic": col}))
    idx.close()


def test_lancedb_tenant_layouts_match_brute_force(tmp_path: Path) -> None:
    s, run = _run(tmp_path, {"backend": "lancedb-hnsw",
                             "build": {"num_partitions": 1, "m": 8, "ef_construction": 40},
                             "search": {"ef": [20, 80]}}, {**TENANTS, "layouts": ["shared"]})
    shared = s["layouts"][0]
    assert shared["filter"] == "engine" and shared["foreign_ids"] == 0
    for key in ("tenant_recall_p5", "tenants_meeting", "p95_ms", "bytes_per_vector"):
        assert shared[key] is not None
    assert _check_against_brute_force(run) == {"shared"}


@pytest.mark.milvus
def test_milvus_tenant_is_the_partition_key(tmp_path: Path) -> None:
    """The tenant attribute is a VARCHAR partition key (Milvus Lite honours it: the rows are
    hashed into its _pk_ partitions, more than one of them holding rows), and a tenant filter
    returns only that tenant's ids."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1200, 16)).astype(np.float32)
    labels = _labels(1200, 6, seed=1)
    ids = np.arange(1200, dtype=np.int64) * 3 + 7
    idx = create_index("milvus", 16, "l2", {"index_type": "HNSW", "M": 8},
                       workdir=tmp_path / "m")
    assert isinstance(idx, SupportsFilter)
    try:
        idx.attach_attributes(Attributes(1200, {}, {"tenant": LabelColumn.from_rows(
            labels.tolist())}, tenant="tenant"))
        idx.build(x, ids)
        client, name = idx._client, idx.collection  # type: ignore[attr-defined]
        fields = {f["name"]: f for f in client.describe_collection(name)["fields"]}
        assert fields["a_tenant"].get("is_partition_key") is True
        filled = [p for p in client.list_partitions(name)
                  if p.startswith("_pk_") and client.get_partition_stats(name, p)["row_count"]]
        assert len(filled) > 1
        idx.set_search_params(ef=40)
        assert _foreign(idx, x, labels, ids) == 0
    finally:
        idx.close()


@pytest.mark.redis
def test_redis_tag_filter_never_returns_another_tenants_id(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1000, 16)).astype(np.float32)
    labels = _labels(1000, 5, seed=2)
    ids = np.arange(1000, dtype=np.int64)  # Redis filters over row numbers
    idx = create_index("redis", 16, "l2", {"M": 8, "EF_CONSTRUCTION": 32})
    assert isinstance(idx, SupportsFilter)
    try:
        idx.attach_attributes(Attributes(1000, {}, {"tenant": LabelColumn.from_rows(
            labels.tolist())}, tenant="tenant"))
        idx.build(x)
        idx.set_search_params(EF_RUNTIME=40)
        assert _foreign(idx, x, labels, ids) == 0
    finally:
        idx.close()
