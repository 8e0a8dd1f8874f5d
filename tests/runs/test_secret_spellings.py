"""A planted password in every spelling a user may give (issue 20 item 4) reaches no file, stdout
or stderr of a real command: URL-special characters in a URL's password (``#``, ``/``, ``'``; read
up to the first ``@`` by SQLAlchemy and libpq), a libpq key=value DSN in ``RWB_PG_URL``, a Milvus
URI in ``RWB_MILVUS_URI``, ``PGPASSWORD`` in the environment. Each command fails to connect (a
closed port), which is where clients echo what they were given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

PLANTED = "Pl4nted"  # the start of every password below: no piece of it may show
PASSWORD = "Pl4nted#S3c/r'et"
SMALL = {"dataset": "synthetic-small", "k": 10, "warmup": 2, "batch_repeats": 1}


def rwb(tmp_path: Path, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "retrieval", *args], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "PWD": str(tmp_path), **(env or {})})


def leaks(tmp_path: Path, proc: subprocess.CompletedProcess[str]) -> list[str]:
    """Where the planted password (or its first piece) shows: the output, or a file."""
    found = [name for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr))
             if PLANTED in text or "S3c" in text]
    for f in tmp_path.rglob("*"):
        if f.is_file() and (PLANTED.encode() in f.read_bytes() or b"S3c" in f.read_bytes()):
            found.append(str(f))
    return found


def spec(tmp_path: Path, **fields: object) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SMALL, **fields}))
    return "spec.yaml"


@pytest.mark.parametrize("storage", [
    f"postgresql+psycopg://u:{PASSWORD}@127.0.0.1:1/db",
    "postgresql+psycopg://u:Pl4nted/S3cret@127.0.0.1:1/db",
    "postgresql+psycopg://u:Pl4nted%23S3cret@127.0.0.1:1/db",
    f"redis://default:{PASSWORD}@127.0.0.1:1/0",
])
def test_a_bad_storage_url_shows_no_password(storage: str, tmp_path: Path) -> None:
    name = spec(tmp_path, name="leak", target_recall=0.8, indexes=[
        {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
         "search": {"ef_search": [10]}}], tune={"strategy": "target"})
    proc = rwb(tmp_path, "sweep", name, "--storage", storage, "--out", "run")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "127.0.0.1" in proc.stderr, proc.stderr
    assert leaks(tmp_path, proc) == []


def test_a_libpq_dsn_with_a_password_shows_none(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    name = spec(tmp_path, name="pgleak", indexes=[
        {"backend": "pgvector", "build": {"m": 8, "ef_construction": 32},
         "search": {"ef_search": [10]}}])
    dsn = ("host=127.0.0.1 port=1 user=u password='Pl4nted#S3c/r\\'et' "
           "sslpassword=Pl4ntedSsl dbname=x")
    proc = rwb(tmp_path, "eval", name, "--out", "run",
               env={"RWB_PG_URL": dsn, "PGPASSWORD": "Pl4ntedEnv"})
    assert proc.returncode == 3, proc.stderr  # not reachable: exit 3
    assert "cannot connect to PostgreSQL at host=127.0.0.1" in proc.stderr, proc.stderr
    assert leaks(tmp_path, proc) == []


def test_a_milvus_uri_with_a_password_shows_none(tmp_path: Path) -> None:
    pytest.importorskip("pymilvus")
    name = spec(tmp_path, name="mvleak", indexes=[
        {"backend": "milvus", "build": {"index_type": "HNSW", "M": 8, "efConstruction": 32},
         "search": {"ef": [10]}}])
    proc = rwb(tmp_path, "eval", name, "--out", "run",
               env={"RWB_MILVUS_URI": "http://root:Pl4nted#S3cret@127.0.0.1:1"})
    assert proc.returncode == 3, proc.stderr  # not reachable: exit 3
    assert "cannot connect to Milvus at http://***@127.0.0.1:1" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and leaks(tmp_path, proc) == []
