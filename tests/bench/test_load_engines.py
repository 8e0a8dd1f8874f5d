"""`rwb bench load` on the out-of-process engines: pgvector on a real PostgreSQL and Redis vector
search on a real Redis, closed loop + open loop + a capacity search, with thread clients and with
client processes that search the index the parent built on the server (never rebuilt). Recall
under load must equal the recall of the same index with no load: at a fixed offered rate whose
window holds every query the same number of times the two are equal exactly; a closed loop's
window holds a near-even mix, so it is within a small margin. About 3-5 s per backend and client
kind on 2 cores. The attach tests show that a second index on the owner's server-side index
answers the same without building (what a client process does)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from retrieval.cli import main

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

# 40 queries; the open point at 100 QPS with a fixed interval asks requests 20..99 in its
# 0.8 s window: every query exactly twice
DATASET = {"kind": "synthetic", "n": 2000, "n_queries": 60, "dim": 32, "metric": "l2",
           "seed": 5}
BASE: dict[str, Any] = {
    "dataset": DATASET, "k": 10, "queries": 40, "warmup_s": 0.2, "duration_s": 1.0,
    "max_lag_us": 50_000.0, "slo": {"p99_ms": 100.0, "target_recall": 0.5},
    "closed": {"clients": [1, 3]},
    "open": {"arrival": "fixed", "clients": 8, "rates": [100.0],
             "search": {"start_qps": 100, "max_qps": 900, "growth": 3.0, "steps": 2}},
}
# small graphs and a low ef so that recall is well below 1 (a wrong answer would show)
CONFIGS = {
    "pgvector": {"backend": "pgvector", "label": "pg", "build": {"m": 4, "ef_construction": 16},
                 "search": {"ef_search": 10}},
    "redis": {"backend": "redis", "label": "redis", "build": {"M": 4, "EF_CONSTRUCTION": 16},
              "search": {"EF_RUNTIME": 10}},
}
POINT_KEYS = {"mode", "clients", "offered_qps", "achieved_qps", "p99_ms", "p99_ms_uncorrected",
              "recall", "errors", "timeouts"}


def _run(tmp_path: Path, capsys: Any, engine: str, client: str) -> dict[str, Any]:
    spec = tmp_path / f"{engine}-{client}.yaml"
    data = {**BASE, "name": f"{engine}-{client}", "client": client, "processes": 2,
            "configs": [CONFIGS[engine]]}
    if client == "processes":  # each point starts its processes (~2 s): two points
        data["closed"] = {"clients": [3]}
        data["open"] = {**BASE["open"], "search": None}
    spec.write_text(yaml.safe_dump(data))
    rc = main(["bench", "load", str(spec), "--json", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def _check(s: dict[str, Any], client: str) -> None:
    assert s["partial"] is False and s["client"] == client
    (c,) = s["configs"]
    assert set(c) >= {"capacity_qps", "recall_unloaded", "points"}
    unloaded = c["recall_unloaded"]
    assert 0.5 < unloaded < 0.99, unloaded  # an approximate index: answers can differ
    modes = [p["mode"] for p in c["points"]]
    if client == "processes":
        assert modes == ["closed", "open"] and c["capacity_qps"] is None, modes
    else:
        assert modes[:3] == ["closed", "closed", "open"] and len(modes) >= 4, modes
        # the capacity is the highest searched rate that met the SLO (none: not even 100 QPS,
        # as on a loaded machine); whether 100 QPS meets it is a benchmark's question
        passing = [p["offered_qps"] for p in c["points"][3:] if p["meets_slo"]]
        assert c["capacity_qps"] == (max(passing) if passing else None), c
    for p in c["points"]:
        assert set(p) >= POINT_KEYS, POINT_KEYS - set(p)
        assert p["client"] == client
        assert p["errors"] == 0, p
        assert p["achieved_qps"] > 0 and p["p99_ms"] >= p["p50_ms"] > 0, p
        assert p["p99_ms_uncorrected"] > 0, p
        if p["mode"] == "closed":
            assert p["clients"] in (1, 3) and p["offered_qps"] is None
            assert abs(p["recall"] - unloaded) <= 0.03, (p["recall"], unloaded)
    fixed = next(p for p in c["points"] if p["mode"] == "open" and p["offered_qps"] == 100.0)
    assert fixed["clients"] == 8 and fixed["n"] == 80, fixed
    assert fixed["recall"] == pytest.approx(unloaded, abs=1e-9)


@pytest.mark.pgvector
@pytest.mark.parametrize("client", ["threads", "processes"])
def test_pgvector_under_load(tmp_path, capsys, pg_url, client):
    import psycopg

    def tables() -> int:
        with psycopg.connect(pg_url) as conn:
            row = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'rwb_%'")
            return int(row.fetchone()[0])

    before = tables()
    _check(_run(tmp_path, capsys, "pgvector", client), client)
    assert tables() == before  # one table, built and dropped by the parent (not by a client)


@pytest.mark.redis
@pytest.mark.parametrize("client", ["threads", "processes"])
def test_redis_under_load(tmp_path, capsys, redis_url, monkeypatch, client):
    monkeypatch.setenv("REDIS_URL", redis_url)
    _check(_run(tmp_path, capsys, "redis", client), client)


def _attach_roundtrip(make: Any, bad: dict[str, Any], field: str) -> None:
    """A second index attached to the first's server-side index answers the same, leaves it in
    place when closed, and a handle naming no rwb index is one line naming the field."""
    import numpy as np

    from retrieval.errors import ConfigError
    from retrieval.indexes.base import SupportsServerAttach

    rng = np.random.default_rng(3)
    x = rng.standard_normal((600, 16)).astype(np.float32)
    q = rng.standard_normal((20, 16)).astype(np.float32)
    owner, other = make(), make()
    try:
        assert isinstance(owner, SupportsServerAttach)
        owner.build(x)
        other.attach(owner.server_handle())
        np.testing.assert_array_equal(other.search(q, 10).ids, owner.search(q, 10).ids)
        other.close()  # the owner's index stays
        assert (owner.search(q, 10).ids >= 0).all()
        third = make()
        with pytest.raises(ConfigError) as err:
            third.attach(bad)
        assert field in str(err.value) and "\n" not in str(err.value)
        third.close()
    finally:
        other.close()
        owner.close()


@pytest.mark.pgvector
def test_pgvector_attach_searches_the_owners_table(pg_url):
    from retrieval.indexes import create_index

    def make() -> Any:
        idx = create_index("pgvector", 16, "l2", {"m": 8, "ef_construction": 32})
        idx.set_search_params(ef_search=20)
        return idx

    _attach_roundtrip(make, {"table": "pg_class; DROP TABLE x"}, "'table'")


@pytest.mark.redis
def test_redis_attach_searches_the_owners_index(redis_url, monkeypatch):
    from retrieval.indexes import create_index

    monkeypatch.setenv("REDIS_URL", redis_url)

    def make() -> Any:
        idx = create_index("redis", 16, "l2", {"M": 8, "EF_CONSTRUCTION": 32})
        idx.set_search_params(EF_RUNTIME=20)
        return idx

    _attach_roundtrip(make, {"index_name": "idx:*"}, "'index_name'")
