"""How ``make test`` hands test files to its xdist workers: the known-long files first (the table
in tests/conftest.py), the rest by their number of tests, xdist's own reordering switched off in
scripts/run_tests.sh so that this order is the one the workers get."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import (
    HEAVY_FILES,
    SAME_CORPUS_AS_FIRST,
    _cpu_now,
    _heavy_files_first,
    cpu_report,
)

ROOT = Path(__file__).resolve().parents[2]


def _items(*nodeids: str) -> list[Any]:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_every_listed_file_exists() -> None:
    """A renamed or split file left in the table would silently lose its place at the front."""
    missing = [f for f in HEAVY_FILES if not (ROOT / f).is_file()]
    assert not missing, f"tests/conftest.py HEAVY_FILES names files that do not exist: {missing}"
    assert all(seconds > 0 for seconds in HEAVY_FILES.values())


def test_heavy_files_first_then_most_tests_first() -> None:
    heavy, lighter = [f for f in sorted(HEAVY_FILES, key=HEAVY_FILES.__getitem__, reverse=True)
                      if f not in SAME_CORPUS_AS_FIRST][:2]
    items = _items("tests/a/test_one.py::t1",
                   "tests/b/test_three.py::t1", "tests/b/test_three.py::t2",
                   f"{lighter}::x", "tests/b/test_three.py::t3",
                   f"{heavy}::y1", f"{heavy}::y2", "tests/a/test_one_more.py::t1")
    _heavy_files_first(items)
    assert [i.nodeid for i in items] == [
        f"{heavy}::y1", f"{heavy}::y2", f"{lighter}::x",
        "tests/b/test_three.py::t1", "tests/b/test_three.py::t2", "tests/b/test_three.py::t3",
        "tests/a/test_one.py::t1", "tests/a/test_one_more.py::t1",  # ties keep collection order
    ]


def test_files_of_the_same_corpus_wait_for_the_first_files_time() -> None:
    """A file embedding the corpus the first heavy file embeds is handed out only after the
    other files given out meanwhile add up to the first file's time (not beside it, idle on the
    embedding cache's lock)."""
    ranked = sorted(HEAVY_FILES, key=HEAVY_FILES.__getitem__, reverse=True)
    first = ranked[0]
    assert first not in SAME_CORPUS_AS_FIRST
    others = [f for f in ranked[1:] if f not in SAME_CORPUS_AS_FIRST]
    items = _items(*(f"{f}::t" for f in reversed(ranked)), "tests/z/test_light.py::t")
    _heavy_files_first(items)
    files = [i.nodeid.split("::")[0] for i in items]
    assert files[0] == first
    for held in SAME_CORPUS_AS_FIRST:
        before = files[1:files.index(held)]
        spent = sum(HEAVY_FILES.get(f, 0.0) for f in before if f not in SAME_CORPUS_AS_FIRST)
        assert spent >= HEAVY_FILES[first], (held, spent)
        # and not later than needed: without the last file before it, the time is not reached
        last = [f for f in before if f not in SAME_CORPUS_AS_FIRST][-1]
        assert spent - HEAVY_FILES[last] < HEAVY_FILES[first]
    assert set(files) == {*ranked, "tests/z/test_light.py"} and len(others) > 0


def test_run_tests_keeps_the_conftest_order() -> None:
    script = (ROOT / "scripts" / "run_tests.sh").read_text()
    assert "--dist loadfile --no-loadscope-reorder" in script


def test_run_tests_stops_the_embedding_warm_up_before_pytest() -> None:
    """The embedding warm-up uses the core the serial phases leave idle only: it is stopped
    before the workers start, never a third CPU-bound process beside them."""
    script = (ROOT / "scripts" / "run_tests.sh").read_text()
    start = script.index('echo "== pytest"')
    assert "\nstop_embed_prewarm\n" in script[:start]
    assert 'kill "$pid"' in script[script.index("stop_embed_prewarm() {"):start]


@pytest.mark.model
def test_warm_up_pieces_are_reused_by_the_corpus_chunk(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """What the warm-up stored in pieces (its rows) is what the test that embeds the whole
    corpus reads: no row embedded twice, the vectors those of one batch within 1e-5. Ten short
    texts in pieces of 4 test the same mechanism as SciFact in pieces of 128."""
    import numpy as np

    spec = importlib.util.spec_from_file_location("prewarm_tests",
                                                  ROOT / "scripts" / "prewarm_tests.py")
    assert spec is not None and spec.loader is not None
    pw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pw)
    texts = [f"sentence {i} about retrieval over {7 * i} vectors" for i in range(10)]
    monkeypatch.setattr(pw, "PIECE", 4)
    monkeypatch.setattr(pw, "CORPORA", {"tiny": lambda: texts})
    monkeypatch.setattr(pw, "DATASETS", ())
    for name in ("RWB_CACHE_DIR", "RWB_INDEX_CACHE_DIR"):  # the warm-up sets them: restored
        monkeypatch.setenv(name, os.environ.get(name, str(tmp_path / "unset")))
    folder = tmp_path / "embeddings"
    pw.warm_embeddings(folder)
    assert len(list(folder.glob("*.rows"))) == 3  # 4 + 4 + 2 texts, each piece stored

    from retrieval.embed import default_embedder
    from retrieval.embed.cache import CachedEmbedder

    inner = default_embedder().inner
    whole = CachedEmbedder(inner, folder)
    got = whole.embed(texts)
    assert whole.reused_rows == len(texts) and whole.misses == 0  # assembled, nothing embedded
    assert whole.path_for(texts).is_file()
    np.testing.assert_allclose(got, inner.embed(texts), atol=1e-5)


def test_cpu_report_ranks_tests_and_files_by_cpu_seconds() -> None:
    """The CPU report at the end of a run: tests and files (their tests summed, what HEAVY_FILES
    lists) largest first, and the total."""
    lines = cpu_report({"tests/a/test_x.py::t1": 3.0, "tests/a/test_x.py::t2": 2.5,
                        "tests/b/test_y.py::t": 4.0, "tests/c/test_z.py::t": 0.5}, top=2)
    assert lines[0] == "10 CPU-s in 4 tests; the largest tests:"
    assert [line.split()[-1] for line in lines[1:3]] == ["tests/b/test_y.py::t",
                                                        "tests/a/test_x.py::t1"]
    assert lines[3] == "the largest files:"
    assert lines[4].split() == ["5.5", "CPU-s", "tests/a/test_x.py"]
    assert lines[5].split() == ["4.0", "CPU-s", "tests/b/test_y.py"] and len(lines) == 6


def test_cpu_now_counts_this_process_and_its_subprocesses() -> None:
    """A test's CPU-seconds include the subprocesses it waited for (``rwb`` runs, kernels)."""
    import subprocess
    import sys

    before = _cpu_now()
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    assert _cpu_now() - before > 0.05
