"""Helpers shared by test modules (``from tests.helpers import ...``): one definition each,
instead of a copy per test file. Fixtures live in tests/conftest.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def rwb(*args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The real command line, ``python -m retrieval ARGS``, in a child process (this checkout's
    code first on its path; ``PWD`` follows ``cwd``)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    if cwd is not None:
        full["PWD"] = str(cwd)
    return subprocess.run([sys.executable, "-m", "retrieval", *args], capture_output=True,
                          text=True, cwd=cwd, env=full, timeout=timeout)


def export_cli(run: Path | str, folder: Path, engine: str, backend: str | None = None,
               name: str | None = None) -> Path:
    """``rwb export RUN --engine E [--backend B] --out FOLDER/NAME`` in process (exit 0 asserted);
    NAME defaults to ``E-B.yaml``."""
    from retrieval.cli import main

    path = folder / (name or f"{engine}-{backend or engine}.yaml")
    args = ["export", str(run), "--engine", engine,
            *(["--backend", backend] if backend is not None else []), "--out", str(path)]
    assert main(args) == 0
    assert path.is_file(), f"rwb export exited 0 but wrote no {path}"
    return path


def verify_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, dict]:
    """``rwb verify ARGS --json`` in process: its exit code and its JSON report."""
    from retrieval.cli import main

    capsys.readouterr()
    code = main(["verify", *map(str, args), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert isinstance(report, dict), report
    return code, report


def one_line(error: BaseException | pytest.ExceptionInfo[Any] | str, *needles: str) -> str:
    """The message of ``error`` (an exception, pytest's ExceptionInfo or a text), asserted to be
    one line holding every needle."""
    if isinstance(error, pytest.ExceptionInfo):
        error = error.value
    text = str(error)
    assert "\n" not in text, text
    for needle in needles:
        assert needle in text, (needle, text)
    return text


def dead_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    assert port > 0
    return port


def caller_ids(n: int) -> np.ndarray:
    """``n`` int64 ids that are not row numbers (1,000,000 + 7 * row)."""
    return 1_000_000 + 7 * np.arange(n, dtype=np.int64)


def recall_at(got: Sequence[Sequence[Any]] | np.ndarray,
              truth: Sequence[Sequence[Any]] | np.ndarray) -> float:
    """Mean over queries of |got & truth| / |truth| (recall@k with k = len(truth row))."""
    assert len(got) == len(truth), (len(got), len(truth))
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(got, truth,
                                                                         strict=True)]))


def chosen_searches(summary: dict) -> dict:
    """A sweep summary's chosen search params per build, keyed by the build's ``quality``."""
    return {b["build"]["quality"]: (b["chosen"] or {}).get("search") for b in summary["builds"]}


def point_keys(study: Any) -> list[tuple[str, str]]:
    """(unit key, search config as sorted JSON) of every COMPLETE trial of an rwb sweep's
    Optuna study, in trial order: a point measured twice appears twice."""
    return [(t.user_attrs["rwb:unit"], json.dumps(t.user_attrs["rwb:search"], sort_keys=True))
            for t in study.trials if t.state.name == "COMPLETE"]


def write_vectors(folder: Path, n: int, dim: int = 8, n_queries: int = 5, seed: int = 0) -> None:
    """``base.npy`` (n x dim) and ``queries.npy`` (n_queries x dim), float32 normals, in folder."""
    rng = np.random.default_rng(seed)
    np.save(folder / "base.npy", rng.standard_normal((n, dim)).astype(np.float32))
    np.save(folder / "queries.npy", rng.standard_normal((n_queries, dim)).astype(np.float32))


def export_and_verify(run: Path, engine: str, out: Path, capsys: pytest.CaptureFixture[str]
                      ) -> tuple[dict[str, Any], str]:
    """``rwb export RUN --engine E --out OUT`` then ``rwb verify OUT`` (exit 0 asserted): the
    exported document and verify's printed text."""
    import yaml

    from retrieval.cli import main

    assert main(["export", str(run), "--engine", engine, "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    capsys.readouterr()
    code = main(["verify", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    return doc, text


def cli_ok(*argv: str) -> str:
    """``rwb ARGV`` in process, exit 0 asserted: what it printed on stdout."""
    import contextlib
    import io

    from retrieval.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


def sweep_process(spec: Path, out: Path, env: Mapping[str, str]) -> subprocess.Popen[str]:
    """``rwb sweep SPEC --out OUT --json`` in a child process (unbuffered, pipes open) with
    ``env`` added: for tests that kill a server or the sweep while it runs."""
    return subprocess.Popen([sys.executable, "-m", "retrieval", "sweep", str(spec), "--out",
                             str(out), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1", **env})


def complete_trials(db: str, study: str) -> dict[int, tuple]:
    """The COMPLETE trials of Optuna study ``study`` in storage ``db``: number -> (params,
    values); empty while the study does not exist yet."""
    import optuna

    try:
        trials = optuna.load_study(study_name=study, storage=db).trials
    except Exception:  # not created yet
        return {}
    return {t.number: (t.params, t.values) for t in trials
            if t.state == optuna.trial.TrialState.COMPLETE}


def cranfield_beir(folder: Path, n_queries: int, n_docs: int, seed: int = 3) -> Path:
    """A seeded Cranfield cut (graded qrels) written as a BEIR folder at ``folder``; the test
    is skipped when the shared Cranfield data is absent."""
    from retrieval.errors import DataError
    from retrieval.loaders.shared import load_cranfield
    from retrieval.testing.byo import write_beir

    try:
        coll = load_cranfield(relevance="gain")
    except DataError as exc:
        pytest.skip(f"Cranfield data folder absent: {exc}")
    return write_beir(coll, folder, n_queries=n_queries, n_docs=n_docs, seed=seed)


def scifact_cut(folder: Path, n_queries: int = 40, n_docs: int = 440) -> Path:
    """A small BEIR cut of SciFact's test split (seeded judged claims, their cited abstracts
    and other abstracts up to ``n_docs``) written at ``folder``; the quality-target tests share
    the default 40 / 440 cut (its embeddings are cached once). Skipped without the data."""
    from retrieval.errors import DataError
    from retrieval.loaders.shared import load_scifact
    from retrieval.testing.byo import write_beir

    try:
        coll = load_scifact("test")
    except DataError as exc:
        pytest.skip(f"SciFact data folder absent: {exc}")
    return write_beir(coll, folder, n_queries=n_queries, n_docs=n_docs)


def pg_collection_state(coll: Mapping[str, Any]) -> dict[str, Any]:
    """What rwb must never change in a live pgvector collection (``coll``: ``url``,
    ``table``): rows, a checksum of the vectors, index definitions, the
    schema's relations."""
    import psycopg

    t = coll["table"]
    with psycopg.connect(coll["url"], autocommit=True) as conn:
        rows = conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        digest = conn.execute(f"SELECT md5(string_agg(item_id::text || ':' || emb::text, ',' "
                              f"ORDER BY item_id)) FROM {t}").fetchone()[0]
        idx = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s "
                           "ORDER BY indexname", (t,)).fetchall()
        rels = conn.execute("SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n "
                            "ON n.oid = c.relnamespace WHERE n.nspname = 'public' "
                            "ORDER BY 1").fetchall()
        ext = conn.execute("SELECT extname, extversion FROM pg_extension ORDER BY 1").fetchall()
    return {"rows": rows, "md5": digest, "indexes": idx, "relations": rels, "extensions": ext}


def law_curves(miss: Any, sizes: Sequence[int], probes: Sequence[int], margin: float,
               high: int) -> list[Any]:
    """Scale-study probe curves (``retrieval.tune.scale.Curve``) of a known law: ``miss(n,
    knob)`` -> per-query miss rates in [0, 1]; every probe carries the lower bound's ``margin``
    and the range's top ``high``."""
    from retrieval.tune import scale as sc

    return [sc.Curve(n, tuple(probes), np.stack([1.0 - miss(n, v) for v in probes]),
                     tuple(margin for _ in probes), high) for n in sizes]


def law_exact_knob(miss: Any, n: int, low: int, high: int, target: float,
                   margin: float) -> int:
    """The smallest knob in [low, high] whose mean recall under the law ``miss`` at size ``n``,
    minus ``margin``, meets ``target``: the exact knob a prediction is judged against."""
    return next(v for v in range(low, high + 1)
                if float((1.0 - miss(n, v)).mean()) - margin >= target - 1e-12)
