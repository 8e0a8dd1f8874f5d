"""Tenants study (``tenants:`` in a sweep spec) end to end on real engines: per-tenant recall of
every layout recomputed by brute force from ids.parquet, and no tenant filter ever returns
another tenant's id (hnswlib and Qdrant edge here; pgvector below, marked)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from retrieval.api.verbs import sweep
from retrieval.data import VectorDataset

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

K = 10
N, NQ, DIM = 2000, 120, 16


def _dataset() -> VectorDataset:
    rng = np.random.default_rng(3)
    base = rng.standard_normal((N, DIM)).astype(np.float32)
    queries = rng.standard_normal((NQ, DIM)).astype(np.float32)
    # the caller's ids: not row numbers
    return VectorDataset.from_arrays(base, queries, "l2", ids=np.arange(N) * 3 + 100_000,
                                     query_ids=np.arange(NQ) + 7)


def _run(tmp_path: Path, entry: dict[str, Any], tenants: dict[str, Any]) -> tuple[
        dict[str, Any], Path]:
    spec = {"name": "tenants", "dataset": "unused", "k": K, "target_recall": 0.8, "warmup": 0,
            "indexes": [entry], "tenants": tenants}
    r = sweep(spec, dataset=_dataset(), out=tmp_path / "run", force=True)
    return r.summary.to_json_dict(), tmp_path / "run"


def _check_against_brute_force(run: Path) -> set[str]:
    """Every layout x config in ids.parquet: ids inside the query's tenant, and the chosen
    configs' per-tenant recall (tenants.parquet) equal to a numpy brute force per tenant.
    Returns the layouts seen."""
    ds = _dataset()
    ids = pd.read_parquet(run / "ids.parquet")
    per_tenant = pd.read_parquet(run / "tenants.parquet")
    summary = json.loads((run / "summary.json").read_text())
    row_of = {int(c): i for i, c in enumerate(ds.base_ids.ids)}  # type: ignore[union-attr]
    assert {"layout", "tenant", "query", "ids"} <= set(ids.columns)
    labels = np.load(run / "tenant_labels.npy")  # the tenant of every base row
    for tenant, found in zip(ids["tenant"], ids["ids"], strict=True):
        owners = {str(labels[row_of[int(c)]]) for c in found}
        # a tenant filter never returns another tenant's id (every layout, every config)
        assert owners <= {tenant}, f"{tenant} got ids of {owners - {tenant}}"
    sizes = dict(zip(per_tenant["tenant"], per_tenant["size"], strict=False))
    members: dict[str, np.ndarray] = {}
    layouts = set()
    for p in summary["layouts"]:
        layouts.add(p["layout"])
        assert p["foreign_ids"] == 0
        sel = ids[(ids["layout"] == p["layout"]) & (ids["search"] == json.dumps(
            p["search"], sort_keys=True))]
        got = per_tenant[per_tenant["layout"] == p["layout"]].set_index("tenant")["recall"]
        for tenant, group in sel.groupby("tenant"):
            if tenant not in members:
                members[tenant] = _members(summary, run, str(tenant), sizes)
            rows = members[tenant]
            recalls = []
            for q, found in zip(group["query"], group["ids"], strict=True):
                qv = ds.queries[int(q) - 7]
                d = ((ds.base[rows] - qv) ** 2).sum(axis=1)
                exact = set(rows[np.argsort(d, kind="stable")[:K]].tolist())
                hits = len(exact & {row_of[int(c)] for c in found})
                recalls.append(hits / min(K, rows.size))
            assert got[tenant] == pytest.approx(float(np.mean(recalls)), abs=1e-9)
    return layouts


_MEMBERS: dict[str, dict[str, np.ndarray]] = {}


def _members(summary: dict[str, Any], run: Path, tenant: str, sizes: dict[str, int]) -> np.ndarray:
    """The base rows of ``tenant``: from the labels the study saved (labels.npy in the run)."""
    key = str(run)
    if key not in _MEMBERS:
        labels = np.load(run / "tenant_labels.npy")
        _MEMBERS[key] = {str(t): np.flatnonzero(labels == t) for t in np.unique(labels)}
    rows = _MEMBERS[key][tenant]
    assert rows.size == sizes[tenant]
    return rows


def test_hnswlib_layouts_match_brute_force(tmp_path: Path) -> None:
    s, run = _run(tmp_path, {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                             "search": {"ef_search": [10, 40]}},
                  {"count": 40, "sizes": {"zipf": 1.1}, "min_queries": 3})
    assert s["workload"] == "tenants"
    assert next(p for p in s["layouts"] if p["layout"] == "shared")["filter"] == "engine"
    assert _check_against_brute_force(run) == {"shared", "per_tenant", "flat_index"}
    for p in s["layouts"]:
        for key in ("tenant_recall_p5", "tenants_meeting", "p95_ms", "bytes_per_vector"):
            assert p[key] is not None
    assert "size" in s["crossover"]
    # the report draws the per-tenant recall distribution and the layouts' tables
    from retrieval.cli import main

    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r_tenants.png").is_file()
    html = (tmp_path / "r.html").read_text()
    assert "Tenant layouts" in html and "Flat / index crossover" in html


def test_label_files_with_string_labels(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    names = np.array(["acme", "bolt", "corp", "dyn"])
    np.save(tmp_path / "base.npy", names[rng.integers(0, 4, N)])
    np.save(tmp_path / "q.npy", names[rng.integers(0, 4, NQ)])
    s, run = _run(tmp_path, {"backend": "hnswlib", "build": {"M": 8},
                             "search": {"ef_search": 20}},
                  {"labels": str(tmp_path / "base.npy"),
                   "query_labels": str(tmp_path / "q.npy"), "layouts": ["shared"]})
    assert s["tenants"]["count"] == 4
    assert _check_against_brute_force(run) == {"shared"}


def test_qdrant_edge_layouts_match_brute_force(tmp_path: Path) -> None:
    pytest.importorskip("qdrant_edge", reason="qdrant-edge is not installed")
    _, run = _run(tmp_path, {"backend": "qdrant", "build": {"m": 8, "ef_construct": 40},
                             "search": {"hnsw_ef": [10, 40]}},
                  {"count": 12, "sizes": {"zipf": 1.1}, "min_queries": 3})
    assert _check_against_brute_force(run) == {"shared", "per_tenant", "flat_index"}


@pytest.mark.pgvector
@pytest.mark.usefixtures("pg_url")
def test_pgvector_layouts_match_brute_force(tmp_path: Path) -> None:
    _, run = _run(tmp_path, {"backend": "pgvector",
                             "build": {"m": 8, "ef_construction": 40},
                             "search": {"ef_search": 40, "iterative_scan": "relaxed_order"}},
                  {"count": 6, "sizes": {"zipf": 1.1}, "min_queries": 3})
    assert _check_against_brute_force(run) == {"shared", "per_tenant", "flat_index"}


def test_answer_on_a_case_one_layout_must_win(tmp_path: Path) -> None:
    """Post-filtering a shared graph only k deep (overfetch 1) over 40 tenants loses nearly
    every neighbour of a small tenant; one index per tenant at a wide ef finds them: the
    per-tenant layout must be the answer."""
    s, run = _run(tmp_path, {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 64},
                             "search": {"ef_search": 64}},
                  {"count": 40, "sizes": {"zipf": 1.1}, "min_queries": 3, "overfetch": 1,
                   "shared_filter": "postfilter", "layouts": ["shared", "per_tenant"]})
    by = {p["layout"]: p for p in s["layouts"]}
    assert by["shared"]["filter"] == "postfilter"
    assert not by["shared"]["meets"] and by["per_tenant"]["meets"]
    assert s["answer"]["by_p95"]["layout"] == "per_tenant"
    assert s["answer"]["by_bytes"]["layout"] == "per_tenant"
    assert _check_against_brute_force(run) == {"shared", "per_tenant"}


def test_faiss_hnsw_layouts_match_brute_force(tmp_path: Path) -> None:
    _, run = _run(tmp_path, {"backend": "faiss-hnsw", "build": {"M": 8, "ef_construction": 40},
                             "search": {"ef_search": 20}},
                  {"count": 15, "sizes": {"zipf": 1.1}, "min_queries": 3})
    assert _check_against_brute_force(run) == {"shared", "per_tenant", "flat_index"}


@pytest.mark.redis
def test_redis_layouts_match_brute_force(tmp_path: Path, redis_url: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    _, run = _run(tmp_path, {"backend": "redis", "build": {"M": 8, "EF_CONSTRUCTION": 32},
                             "search": {"EF_RUNTIME": 20}},
                  {"count": 6, "sizes": {"zipf": 1.1}, "min_queries": 3})
    assert _check_against_brute_force(run) == {"shared", "per_tenant", "flat_index"}


@pytest.mark.milvus
def test_milvus_layouts_match_brute_force(tmp_path: Path) -> None:
    _, run = _run(tmp_path, {"backend": "milvus", "build": {"index_type": "HNSW"},
                             "search": {"ef": 20}},
                  {"count": 4, "sizes": {"zipf": 1.1}, "min_queries": 3})
    assert _check_against_brute_force(run) == {"shared", "per_tenant", "flat_index"}


def test_a_tenant_too_small_for_its_index_is_searched_exactly(tmp_path: Path) -> None:
    """IVF with more lists than a tenant has rows cannot be built for it: that tenant is
    searched exactly (counted), the others get their index."""
    s, run = _run(tmp_path, {"backend": "faiss-ivf", "build": {"nlist": 64},
                             "search": {"nprobe": 64}},
                  {"count": 15, "sizes": {"zipf": 1.1}, "min_queries": 3,
                   "layouts": ["per_tenant"]})
    exact = s["layouts"][0]["exact_tenants"]
    assert exact["refused"] > 0 and exact["refused"] + exact["small"] < 15
    assert _check_against_brute_force(run) == {"per_tenant"}
