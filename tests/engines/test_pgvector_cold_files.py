"""pgvector cold runs (issue 31, item 3), without a server: which files of a relation are dropped
from the page cache (main fork, its 1 GB segments, free-space and visibility maps; nothing
else), and that only rwb's own tables are ever dropped from a cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.engines.pgvector.cold import PgColdServer, _check_table, _fork_files
from retrieval.errors import ConfigError


def test_a_relations_files_are_its_forks_and_segments(tmp_path: Path) -> None:
    for name in ("16384", "16384.1", "16384.2", "16384_fsm", "16384_vm", "163841", "16384_init",
                 "16385", "16384.x"):
        (tmp_path / name).write_bytes(b"x")
    got = [p.name for p in _fork_files(tmp_path / "16384")]
    assert got == ["16384", "16384.1", "16384.2", "16384_fsm", "16384_vm"]
    assert _fork_files(tmp_path / "99999") == []  # a relation without storage here


@pytest.mark.parametrize("table", ["items", "rwb_123", "rwb_0123456789ab; DROP TABLE x"])
def test_only_rwbs_own_tables_are_dropped_from_a_cache(table: str) -> None:
    with pytest.raises(ConfigError, match="only rwb's own tables"):
        _check_table(table)
    assert _check_table("rwb_0123456789ab") == "rwb_0123456789ab"


def test_a_users_server_is_used_as_given_and_never_stopped(tmp_path: Path) -> None:
    srv = PgColdServer(tmp_path, url="postgresql://u:secret@127.0.0.1:1/db")
    assert srv.own is None and "secret" not in srv.where
    assert "rwb did not start" in (srv.budget_reason() or "")
    srv.close()  # nothing of the user's is stopped or removed
    assert srv.url.endswith(":1/db")
