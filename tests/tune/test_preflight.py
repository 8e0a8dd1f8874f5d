"""Services a spec needs are checked before any work, and an unreachable PostgreSQL is exit 3
("not measurable here", docs/exit-codes.md) in eval and sweep (issue 34, new user 3 and 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from retrieval.cli import main
from tests.helpers import dead_port

pytest.importorskip("psycopg")

SPEC = {
    "name": "pf", "k": 10, "warmup": 0, "batch_repeats": 1,
    "dataset": {"kind": "synthetic", "n": 400, "dim": 8, "n_queries": 20, "metric": "l2"},
    "indexes": [{"backend": "faiss-flat"},
                {"backend": "pgvector", "build": {"m": 4, "ef_construction": 16},
                 "search": {"ef_search": [10, 20]}}],
}



@pytest.mark.parametrize("verb", ["eval", "sweep"])
@pytest.mark.parametrize("url", ["unset", "refused"])
def test_no_reachable_postgresql_is_exit_3_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        verb: str, url: str) -> None:
    if url == "unset":
        monkeypatch.delenv("RWB_PG_URL", raising=False)
    else:
        monkeypatch.setenv("RWB_PG_URL", f"postgresql://u:pw@127.0.0.1:{dead_port()}/x")
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    built: list[str] = []
    import retrieval.indexes.registry as registry

    real = registry.create_index

    def spy(backend: str, *a, **kw):  # no other backend is built first
        built.append(backend)
        return real(backend, *a, **kw)

    monkeypatch.setattr(registry, "create_index", spy)
    assert main([verb, str(spec), "--out", str(tmp_path / "r")]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("rwb: not measurable here:"), err
    assert "PostgreSQL" in err and "backend 'pgvector'" in err and "pw" not in err
    assert built == [] and not (tmp_path / "r").exists()
