"""A Milvus Lite server that dies under rwb's searches: each search is one line of rwb's own
(BackendError), and pymilvus's per-RPC error tracebacks and reconnect warnings are not printed
(a server killed mid `rwb bench load` printed ~8,000-30,000 lines of them)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pymilvus", reason="pymilvus not installed (extra 'milvus')")
pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")

from retrieval.engines.milvus.index import MilvusIndex
from retrieval.engines.milvus.params import FlatBuild
from retrieval.engines.milvus.server import milvus_lite_server
from retrieval.errors import BackendError
from retrieval.loaders.synthetic import make_synthetic

pytestmark = [pytest.mark.slow, pytest.mark.milvus]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture()
def pymilvus_records() -> Iterator[_Records]:
    """Every record reaching pymilvus's own handlers (its loggers do not propagate)."""
    handler = _Records()
    logger = logging.getLogger("pymilvus")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def test_searches_against_a_dead_server_are_one_line_each(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], pymilvus_records: _Records) -> None:
    ds = make_synthetic(300, 8, 8, seed=1)
    with milvus_lite_server(tmp_path / "srv") as uri:
        idx = MilvusIndex(ds.dim, "l2", FlatBuild(), uri=uri, workdir=tmp_path)
        idx.connect_timeout_s = 2.0
        idx.build(ds.base)
        assert idx.search(ds.queries, 5).ids.shape == (8, 5)
    capfd.readouterr()  # the server is gone from here on
    pymilvus_records.records.clear()
    errors: list[str] = []
    others: list[BaseException] = []

    def client() -> None:
        for _ in range(3):
            try:
                idx.search(ds.queries[:2], 5)
            except BackendError as exc:
                errors.append(str(exc))
            except BaseException as exc:  # any other kind is the failure
                others.append(exc)

    try:
        threads = [threading.Thread(target=client) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with pytest.raises(BackendError) as err:
            asyncio.run(idx.asearch(ds.queries[:2], 5))
        errors.append(str(err.value))
    finally:
        idx.close()  # a dead server: nothing to release, and no error either
    out = capfd.readouterr()
    assert not others, others
    assert len(errors) == 10 and all("\n" not in e and "search failed" in e for e in errors)
    assert "Traceback" not in out.err, out.err[:2000]
    assert [r.getMessage()[:200] for r in pymilvus_records.records] == []
    # pymilvus's logging outside rwb's calls is left as it was
    logging.getLogger("pymilvus.decorators").error("a record of the caller's own")
    assert [r.getMessage() for r in pymilvus_records.records] == ["a record of the caller's own"]
