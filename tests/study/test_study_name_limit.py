"""A ``--study`` name longer than Optuna's SQL schema holds (VARCHAR(512)) on PostgreSQL ended
in a 100-line traceback blaming "invalid data in the commit": one line with the limit, before
the run folder exists; a name of exactly 512 characters works."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from retrieval.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.pgvector]

SPEC = """name: tiny
dataset: {kind: synthetic, n: 300, dim: 8, n_queries: 10}
k: 5
indexes: [{backend: faiss-flat}]
"""


def test_study_name_over_the_sql_limit_is_one_line(tmp_path: Path, pg_storage_url: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    code = main(["sweep", str(spec), "--strategy", "grid", "--storage", pg_storage_url,
                 "--study", "s" * 600, "--out", str(tmp_path / "long")])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "at most 512 characters" in err and "received 600 characters" in err, err
    assert not (tmp_path / "long").exists()
    assert main(["sweep", str(spec), "--strategy", "grid", "--storage", pg_storage_url,
                 "--study", "s" * 512, "--out", str(tmp_path / "ok")]) == 0
    names = [s.study_name for s in optuna.get_all_study_summaries(pg_storage_url)]
    assert names == ["s" * 512]
