"""Integration fixtures: a real Redis 8 with the search module.

``redis_url``: $REDIS_URL when set (``make test`` starts one server for the session and exports
it), else a private server started from the PyPI wheels for this pytest session. Tests skip with
the reason only when neither exists. ``private_redis`` always starts a server of its own (for
fault tests that kill it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from retrieval.engines.redis.server import (
    RedisServer,
    binaries_available,
    find_binaries,
    redis_server,
)


def _no_redis_reason() -> str:
    try:
        find_binaries()
    except Exception as exc:
        return f"no REDIS_URL set and no local Redis binaries: {exc}"
    return ""


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    env = os.environ.get("REDIS_URL")
    if env:
        yield env
        return
    if not binaries_available():
        pytest.skip(_no_redis_reason())
    with redis_server() as srv:
        yield srv.url


@pytest.fixture()
def private_redis() -> Iterator[RedisServer]:
    """A server only this test uses (it may kill it); stopped afterwards if still alive."""
    if not binaries_available():
        pytest.skip(_no_redis_reason())
    with redis_server() as srv:
        yield srv
